/**
 * A binary min-heap over a strict order `before(a, b)` (a leaves before b). The order must be
 * total for the output to be deterministic: callers break ties (by line, by plan index).
 *
 * Complexity: O(log n) push and pop over n held items.
 */
export class MinHeap<T> {
  private readonly items: T[] = [];

  constructor(private readonly before: (a: T, b: T) => boolean) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const { items, before } = this;
    let at = items.length;
    items.push(item);
    while (at > 0) {
      const up = (at - 1) >> 1;
      const parent = items[up]!;
      if (!before(item, parent)) break;
      items[at] = parent;
      at = up;
    }
    items[at] = item;
  }

  pop(): T | undefined {
    const { items, before } = this;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && before(items[right]!, items[left]!) ? right : left;
      if (!before(items[child]!, last)) break;
      items[at] = items[child]!;
      at = child;
    }
    items[at] = last;
    return top;
  }

  /** Keeps only the items `keep` accepts, in heap order again: O(n). */
  retain(keep: (item: T) => boolean): void {
    const kept = this.items.filter(keep);
    this.items.length = 0;
    for (const item of kept) this.push(item);
  }
}
