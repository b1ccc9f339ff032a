/**
 * Puts trace lines into arrival order within a bounded window. Lines enter in file order and
 * leave in (arrival, line) order once more than `window` lines are held; the rest leave at the
 * end. A line earlier than one already released is out of place by more than the window and
 * cannot be sorted in bounded memory: `push` reports it and the caller refuses the trace.
 *
 * Invariant: every released item's key ≤ every held item's key, so the output is sorted
 * whenever no push was refused. Ties keep file order (the line number breaks them).
 *
 * Held items live in two places: a run (a FIFO queue, sorted because an item joins it only when
 * it is not before the run's last) and a binary heap for the items that arrived out of order.
 * The next to leave is the earlier of the run's head and the heap's top. An in-order file never
 * touches the heap, so each line costs O(1); disorder costs O(log n) for the lines involved.
 */
import { MinHeap } from '../core/min-heap.js';

export interface Arrival {
  arrival: number;
  line: number;
}

function before(a: Arrival, b: Arrival): boolean {
  return a.arrival < b.arrival || (a.arrival === b.arrival && a.line < b.line);
}

export class ArrivalSort<T extends Arrival> {
  private run: T[] = [];
  private runHead = 0;
  private readonly heap = new MinHeap<T>(before);
  /** The last item released, or undefined before the first. */
  released: T | undefined;

  constructor(private readonly window: number) {}

  get size(): number {
    return this.run.length - this.runHead + this.heap.size;
  }

  /** False when `item` arrives before an item already released (nothing is added then). */
  push(item: T): boolean {
    if (this.released !== undefined && before(item, this.released)) return false;
    const run = this.run;
    if (run.length === this.runHead || !before(item, run[run.length - 1]!)) run.push(item);
    else this.heap.push(item);
    return true;
  }

  /** The earliest held item when the window is over-full (or `drain`), else undefined. */
  pop(drain = false): T | undefined {
    const size = this.size;
    if (size === 0 || (!drain && size <= this.window)) return undefined;
    const runNext = this.runHead < this.run.length ? this.run[this.runHead] : undefined;
    const heapNext = this.heap.peek();
    let next: T;
    if (runNext !== undefined && (heapNext === undefined || before(runNext, heapNext))) {
      next = runNext;
      this.run[this.runHead++] = undefined as unknown as T; // let it be collected
      if (this.runHead === this.run.length) {
        this.run.length = 0;
        this.runHead = 0;
      } else if (this.runHead >= 4096 && this.runHead * 2 >= this.run.length) {
        this.run = this.run.slice(this.runHead);
        this.runHead = 0;
      }
    } else next = this.heap.pop()!;
    this.released = next;
    return next;
  }
}
