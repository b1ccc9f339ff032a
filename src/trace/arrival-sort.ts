/**
 * Puts trace lines into arrival order within a bounded window. Lines enter in file order and
 * leave in (arrival, line) order once more than `window` lines are held; the rest leave at the
 * end. A line earlier than one already released is out of place by more than the window and
 * cannot be sorted in bounded memory: `push` reports it and the caller refuses the trace.
 *
 * Invariant: every released item's key ≤ every held item's key, so the output is sorted
 * whenever no push was refused. Ties keep file order (the line number breaks them).
 */
export interface Arrival {
  arrival: number;
  line: number;
}

function before(a: Arrival, b: Arrival): boolean {
  return a.arrival < b.arrival || (a.arrival === b.arrival && a.line < b.line);
}

export class ArrivalSort<T extends Arrival> {
  private readonly heap: T[] = [];
  /** The last item released, or undefined before the first. */
  released: T | undefined;

  constructor(private readonly window: number) {}

  get size(): number {
    return this.heap.length;
  }

  /** False when `item` arrives before an item already released (nothing is added then). */
  push(item: T): boolean {
    if (this.released !== undefined && before(item, this.released)) return false;
    const heap = this.heap;
    let i = heap.length;
    heap.push(item);
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(item, heap[parent]!)) break;
      heap[i] = heap[parent]!;
      i = parent;
    }
    heap[i] = item;
    return true;
  }

  /** The earliest held item when the window is over-full (or `drain`), else undefined. */
  pop(drain = false): T | undefined {
    const heap = this.heap;
    if (heap.length === 0 || (!drain && heap.length <= this.window)) return undefined;
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        if (left >= heap.length) break;
        const right = left + 1;
        const child = right < heap.length && before(heap[right]!, heap[left]!) ? right : left;
        if (!before(heap[child]!, last)) break;
        heap[i] = heap[child]!;
        i = child;
      }
      heap[i] = last;
    }
    this.released = top;
    return top;
  }
}
