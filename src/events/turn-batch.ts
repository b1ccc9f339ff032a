/**
 * Items pushed during one event-loop turn, handed over together when the turn ends (or at once on
 * flush()): how a KV event feed turns a burst of messages into one batched addon call.
 *
 * Invariants: items are handed over in push order, each once; flush() with nothing pending does
 * nothing; clear() drops what is pending (a closed feed's leftovers).
 */
export class TurnBatch<T> {
  private items: T[] = [];
  private scheduled = false;

  constructor(private readonly take: (items: T[]) => void) {}

  push(item: T): void {
    this.items.push(item);
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.flush();
    });
  }

  /** Hands over what is pending now (before something that must follow it in order). */
  flush(): void {
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    this.take(items);
  }

  clear(): void {
    this.items = [];
  }
}
