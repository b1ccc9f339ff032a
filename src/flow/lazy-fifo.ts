/**
 * A FIFO of queued requests that may leave from the middle: removal only marks the request
 * (`waiting = false`) and the FIFO drops such requests when they reach its head. O(1) amortized
 * per request; memory is the requests pushed and not yet passed at the head.
 */
import type { QueuedRequest } from './queued-request.js';

export class LazyFifo<T> {
  private items: Array<QueuedRequest<T>> = [];
  private head = 0;

  /** The oldest waiting request, without removing it; undefined when none waits. */
  peek(): QueuedRequest<T> | undefined {
    const { items } = this;
    while (this.head < items.length && !items[this.head]!.waiting) this.head++;
    if (this.head === items.length) {
      if (items.length > 0) this.reset();
      return undefined;
    }
    // Compact once the passed head is most of the array, so memory follows what still waits.
    if (this.head > 1024 && this.head * 2 > items.length) {
      this.items = items.slice(this.head);
      this.head = 0;
    }
    return this.items[this.head];
  }

  /** Requests held, waiting or not yet dropped. */
  get held(): number {
    return this.items.length - this.head;
  }

  /** Drops every request that no longer waits, wherever it is: O(held). */
  compact(): void {
    this.items = this.items.slice(this.head).filter((r) => r.waiting);
    this.head = 0;
  }

  push(request: QueuedRequest<T>): void {
    this.items.push(request);
  }

  private reset(): void {
    this.items = [];
    this.head = 0;
  }
}
