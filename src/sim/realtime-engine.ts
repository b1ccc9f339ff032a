/**
 * One EngineModel driven in real time, for the simulated engine server (`kvroute sim serve`).
 *
 * The model's clock is virtual seconds since start, `(wall ms − t0) ÷ 1000 × speed`, so at
 * `--speed 10` a step the model prices at 60 ms lasts 6 ms of wall time. Steps run back to back:
 * `engine.step(start)` prices a step [start, end]; a timer fires when the clock reaches `end`,
 * the step's tokens are delivered, and the next step starts at `end`. A late timer (the event
 * loop was busy, or the step is shorter than a timer tick at high speed) delivers every step that
 * is already due in one go, so the model keeps pace with the clock instead of drifting behind
 * it. If it trails by more than `maxLagMs` of wall time (a blocked event loop), it skips ahead.
 *
 * Invariants:
 * - The model decides a step's outcome when the step starts (`Sequence.generated` and
 *   `finishedAt` move then); listeners hear of it only when the clock reaches the step's end.
 *   Tokens of a step are found by comparing each live sequence's `generated` with what it was
 *   last delivered (at most one token per sequence per step).
 * - `submit` first delivers the steps already due, so a new request joins a step that starts no
 *   earlier than its submission (its TTFT is never negative).
 * - `abort` removes the request from the model at once, even mid-step: it emits nothing after.
 * - At most one step timer is pending; `close` clears it and every `after` timer, so a closed
 *   engine keeps no process alive.
 * - `after(seconds)` fires once the model's clock has advanced `seconds` (engine time, so scaled
 *   by `speed` like every engine time), never earlier: a timer that fires early re-arms.
 *
 * Cost: each delivered step visits every live request once: O(live) per step.
 */
import type { EngineModel, EngineRequest, Sequence, StepOutcome } from './engine-model.js';

/** What a submitted request hears, in virtual seconds. */
export interface GenerationListener {
  /** `count` more tokens (one per step), produced by the step that ended at `at`. */
  tokens(count: number, at: number): void;
  /** The request reached its output length; called once, after its last `tokens`. */
  finished(at: number): void;
}

export interface Generation {
  readonly sequence: Sequence;
  /** Aborts the request inside the engine; harmless after it finished. */
  cancel(): void;
}

export interface RealtimeEngineOptions {
  /** Virtual seconds per wall second (default 1). */
  speed?: number;
  /** Wall clock in ms (default `performance.now`). */
  clock?: () => number;
  /** Wall ms the model may trail the clock before it skips ahead (default 250). */
  maxLagMs?: number;
}

export interface RealtimeCounters {
  /** Tokens delivered to listeners (vLLM's generation_tokens). */
  generationTokens: number;
  finished: number;
  aborted: number;
}

interface Live {
  listener: GenerationListener;
  delivered: number;
}

export class RealtimeEngine {
  readonly speed: number;
  readonly counters: RealtimeCounters = { generationTokens: 0, finished: 0, aborted: 0 };
  private readonly clock: () => number;
  private readonly maxLag: number;
  private readonly t0: number;
  private readonly live = new Map<Sequence, Live>();
  private inFlight: StepOutcome | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Pending `after` timers, so close() clears them. */
  private readonly delays = new Set<NodeJS.Timeout>();
  private advancing = false;
  private closed = false;

  constructor(
    readonly engine: EngineModel,
    options: RealtimeEngineOptions = {},
  ) {
    this.speed = options.speed ?? 1;
    if (!(this.speed > 0 && Number.isFinite(this.speed)))
      throw new RangeError(`speed must be a positive number, got ${this.speed}`);
    this.clock = options.clock ?? (() => performance.now());
    this.maxLag = ((options.maxLagMs ?? 250) / 1000) * this.speed;
    this.t0 = this.clock();
  }

  /** The model's clock: virtual seconds since this engine started. */
  now(): number {
    return ((this.clock() - this.t0) / 1000) * this.speed;
  }

  /** Requests submitted and neither finished nor aborted. */
  get liveRequests(): number {
    return this.live.size;
  }

  submit(request: EngineRequest, listener: GenerationListener): Generation {
    if (this.closed) throw new Error('the engine is closed');
    this.advance();
    const sequence = this.engine.submit(request, this.now());
    this.live.set(sequence, { listener, delivered: 0 });
    this.kick();
    return { sequence, cancel: () => this.abort(sequence) };
  }

  /** Aborts a live request inside the engine; false when it already finished or was aborted. */
  abort(sequence: Sequence): boolean {
    if (!this.live.delete(sequence)) return false;
    this.engine.abort(sequence);
    this.counters.aborted++;
    this.kick(); // the blocks it freed may let a waiting request in
    return true;
  }

  /**
   * Releases the blocks a finished `holdBlocks` request kept (EngineModel.releaseHeld), and lets
   * a request waiting for them in; false when it held none.
   */
  releaseHeld(sequence: Sequence): boolean {
    if (!this.engine.releaseHeld(sequence)) return false;
    this.kick();
    return true;
  }

  /**
   * Calls `fire` once the model's clock is `seconds` later than now (never earlier, never after
   * close). Returns a function that cancels it.
   */
  after(seconds: number, fire: () => void): () => void {
    if (!(seconds >= 0 && Number.isFinite(seconds))) throw new RangeError(`seconds must be ≥ 0, got ${seconds}`);
    const due = this.now() + seconds;
    let timer: NodeJS.Timeout | undefined;
    const arm = (): void => {
      if (timer !== undefined) this.delays.delete(timer);
      timer = undefined;
      if (this.closed) return;
      const left = due - this.now();
      if (left <= 0) {
        fire();
        return;
      }
      timer = setTimeout(arm, Math.ceil((left / this.speed) * 1000));
      this.delays.add(timer);
    };
    timer = setTimeout(arm, Math.max(0, Math.ceil((seconds / this.speed) * 1000)));
    this.delays.add(timer);
    return () => {
      if (timer === undefined) return;
      clearTimeout(timer);
      this.delays.delete(timer);
      timer = undefined;
    };
  }

  /** Stops the clock: clears the timers and aborts every live request (listeners hear nothing). */
  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const delay of this.delays) clearTimeout(delay);
    this.delays.clear();
    this.inFlight = undefined;
    for (const sequence of [...this.live.keys()]) this.abort(sequence);
  }

  /** Starts a step now if none is running and there is work. */
  private kick(): void {
    if (this.inFlight !== undefined || this.advancing || this.closed) return;
    this.start(this.now());
    this.schedule();
  }

  private start(at: number): void {
    const outcome = this.engine.step(at);
    // A step that scheduled nothing (no request fits yet) would loop at zero duration: the
    // engine waits instead, and the next submit or finish kicks it again.
    this.inFlight = outcome !== undefined && outcome.end > outcome.start ? outcome : undefined;
  }

  private schedule(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.inFlight === undefined || this.closed) return;
    const delayMs = Math.max(0, ((this.inFlight.end - this.now()) / this.speed) * 1000);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.advance();
    }, delayMs);
  }

  /** Delivers every step whose end the clock has reached, starting each next step at once. */
  private advance(): void {
    if (this.advancing || this.closed) return;
    this.advancing = true;
    try {
      const now = this.now();
      while (this.inFlight !== undefined && this.inFlight.end <= now) {
        const { end } = this.inFlight;
        this.inFlight = undefined;
        this.deliver(end);
        if (this.closed) return;
        this.start(Math.max(end, now - this.maxLag));
      }
    } finally {
      this.advancing = false;
    }
    if (this.inFlight === undefined) this.kick();
    else this.schedule();
  }

  private deliver(at: number): void {
    // Map iteration tolerates deletion, including a listener cancelling another request.
    for (const [sequence, entry] of this.live) {
      const fresh = sequence.generated - entry.delivered;
      if (fresh > 0) {
        entry.delivered = sequence.generated;
        this.counters.generationTokens += fresh;
        entry.listener.tokens(fresh, at);
      }
      if (sequence.finishedAt !== undefined && this.live.delete(sequence)) {
        this.counters.finished++;
        entry.listener.finished(at);
      }
    }
  }
}
