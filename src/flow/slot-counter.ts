/**
 * How many requests hold flow control's slots (flow-controller.ts): a plain count for one
 * thread, or two cells of shared memory for every thread of one `kvroute serve --threads N`
 * process (docs/flow-control.md "Threads"), so the process has one `--max-in-flight`.
 *
 * Shared layout (Int32): [0] requests holding a slot, taken and given back by any thread with
 * atomics; [1] requests waiting in the one queue, which only the main thread (the queue's owner)
 * writes after each change. A thread takes a slot on its own only while nobody waits and more
 * than the headroom is free (thread-admission.ts); everything else is the main thread's call.
 * Hazard: the waiting count is a hint read without a lock: a thread may take a slot just as a
 * request starts waiting; the main thread then admits the waiter at the next slot given back
 * (a thread that gives one back while requests wait tells it), so nobody waits for nothing.
 */
export interface SlotCounter {
  /** Slots held now. */
  readonly value: number;
  /** Takes a slot if fewer than `limit` are held now; false (and nothing taken) otherwise. */
  tryTake(limit: number): boolean;
  release(): void;
}

export class LocalSlots implements SlotCounter {
  value = 0;

  tryTake(limit: number): boolean {
    if (this.value >= limit) return false;
    this.value++;
    return true;
  }

  release(): void {
    this.value--;
  }
}

export class SharedSlots implements SlotCounter {
  /** Bytes of the shared memory a SharedSlots needs. */
  static readonly BYTES = 8;
  private readonly cells: Int32Array;

  constructor(buffer: SharedArrayBuffer) {
    if (buffer.byteLength < SharedSlots.BYTES)
      throw new RangeError(`flow slots need ${SharedSlots.BYTES} bytes of shared memory, got ${buffer.byteLength}`);
    this.cells = new Int32Array(buffer, 0, 2);
  }

  get value(): number {
    return Atomics.load(this.cells, 0);
  }

  tryTake(limit: number): boolean {
    for (;;) {
      const held = Atomics.load(this.cells, 0);
      if (held >= limit) return false;
      if (Atomics.compareExchange(this.cells, 0, held, held + 1) === held) return true;
    }
  }

  release(): void {
    Atomics.sub(this.cells, 0, 1);
  }

  /** Requests waiting in the main thread's queue, as it last published. */
  get waiting(): number {
    return Atomics.load(this.cells, 1);
  }

  /** The main thread publishes its queue's length (it alone writes this cell). */
  set waiting(count: number) {
    Atomics.store(this.cells, 1, count);
  }
}
