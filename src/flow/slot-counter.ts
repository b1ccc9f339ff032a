/**
 * How many requests hold flow control's slots (flow-controller.ts): a plain count for one
 * thread, or two cells of shared memory for every thread of one `kvroute serve --threads N`
 * process (docs/flow-control.md "Threads"), so the process has one `--max-in-flight`.
 *
 * Shared layout (Int32): [0] requests holding a slot, taken and given back by any thread with
 * atomics; [1] requests waiting in the one queue, which only the main thread (the queue's owner)
 * writes after each change; [2 + k] the slots thread k took on its own and holds now, so that a
 * thread that dies is known to the slot, batched reports or not (flow-hub.ts). A thread takes a slot on its own only while nobody waits and more
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
  /** Bytes of the shared memory the slots of a process of `threads` threads need. */
  static bytesFor(threads: number): number {
    return 4 * (2 + threads);
  }

  private readonly cells: Int32Array;

  /** `thread`: this thread's index (0 is the main thread), for takeOwn/releaseOwn. */
  constructor(
    buffer: SharedArrayBuffer,
    private readonly thread = 0,
  ) {
    if (buffer.byteLength < SharedSlots.bytesFor(thread + 1))
      throw new RangeError(
        `flow slots of thread ${thread} need ${SharedSlots.bytesFor(thread + 1)} bytes, got ${buffer.byteLength}`,
      );
    this.cells = new Int32Array(buffer);
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

  /** A slot this thread takes on its own (tryTake), counted as its own too. */
  takeOwn(limit: number): boolean {
    if (!this.tryTake(limit)) return false;
    Atomics.add(this.cells, 2 + this.thread, 1);
    return true;
  }

  releaseOwn(): void {
    Atomics.sub(this.cells, 2 + this.thread, 1);
    this.release();
  }

  /** Gives back every slot `thread` took on its own and still holds (it exited); how many. */
  releaseAllOf(thread: number): number {
    const held = Atomics.exchange(this.cells, 2 + thread, 0);
    if (held > 0) Atomics.sub(this.cells, 0, held);
    return held;
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
