/**
 * One request's spans (docs/tracing.md), made by Tracing.request() when tracing is on:
 *
 *   POST /v1/chat/completions   SERVER    the request, arrival to its last byte
 *     ├ kvroute.route           INTERNAL  one per routing decision: instance, reason, matched blocks,
 *     │                                   predicted cached tokens and TTFT, key kind, policy
 *     └ kvroute.upstream        CLIENT    one per attempt (a retry is a second one): the engine,
 *                                         its answer's status; the engine continues the trace
 *
 * Events: `first_token` on the request and its attempt at the answer's first byte; `completion` on
 * the request at its end. Attributes follow the OpenTelemetry conventions where they have one
 * (`http.*`, `server.*`, `gen_ai.*`), and `kvroute.*` otherwise; span-attributes.ts lists them.
 * A request's session id is not recorded (it may identify a user).
 *
 * The spans are plain fields of this object, not SDK span objects nor attribute maps: this runs
 * on every request's path, and the SDK's spans cost more than the whole budget (bench/RESULTS.md,
 * "tracing"). At end() the trace goes to `finished` (encoded with the next requests to end, or
 * batched for an embedder's exporter), unless the client's trace is unsampled: then nothing is recorded, and the engine
 * still gets a `traceparent` (flag 00). Times are ms since the epoch, with sub-ms fractions.
 *
 * The methods take their moment as `performance.now()` ms (`at`, read by the caller when it has
 * read the clock already for its own use: the exchange times its requests and first bytes for its
 * metrics; each clock read is ~0.1 µs, and a traced request made five); by default they read it.
 *
 * Invariant: every span started here ends exactly once: an attempt at its failure or at the
 * request's end, the request at end(); calls after end() are ignored.
 */
import type { RequestOutcome, UsageCounts } from './proxy-observer.js';
import { newSpanId, traceparentOf, type ParentContext } from './trace-context.js';

/** What the routing decision span records. */
export interface RoutedFacts {
  instance: string;
  reason: string;
  matchedBlocks: number;
  predictedCachedTokens: number;
  /** The learned costs' predicted TTFT, ms; undefined when they have none for the decision. */
  predictedTtftMs: number | undefined;
  /** What the request was keyed by: `tokens`, `text` or `hash_ids`. */
  keys: string;
  policy: string;
}

/**
 * A routing decision's span (it has no duration: the decision is one call): its facts, copied
 * into one object with its time (the encoder reads one object per decision, not two). Its id,
 * like the request span's, is made when it is written out: only the attempt's id leaves earlier
 * (to the engine).
 */
export interface RoutedSpan extends RoutedFacts {
  readonly at: number;
}

/** An attempt's span. */
export interface AttemptSpan {
  readonly spanId: string;
  readonly start: number;
  end: number;
  readonly instance: string;
  /** 1 for the first attempt, 2 for a retry, … */
  readonly number: number;
  /** The engine's answer status; 0 when it gave none. */
  status: number;
  /** Why it failed (`error.type`), and the status message; '' when it did not. */
  errorType: string;
  errorMessage: string;
  /** When its first byte came; 0 when none did. */
  firstByteAt: number;
}

/** Adds to a `performance.now()` reading to make it wall-clock ms since the epoch (sub-ms precise). */
const timeOrigin = performance.timeOrigin;

/**
 * The spans of a request that has none yet. A request almost always has one decision and one
 * attempt: its arrays are made with one element (an empty array's first push reserves 17 slots),
 * as a literal (a spread of this frozen array took ~20 ns, the literal ~4).
 */
const NONE: readonly never[] = Object.freeze([]);

export class RequestTrace {
  readonly start: number;
  /** When end() was called; 0 until then. */
  endedAt = 0;
  requestModel = '';
  /** The answer's status, outcome, usage and error, set by end(). */
  status = 0;
  outcome: RequestOutcome | '' = '';
  usage: UsageCounts | undefined;
  /** What went wrong, for every outcome but success ('' when nothing was said). */
  error = '';
  firstByteAt = 0;
  routes: readonly RoutedSpan[] = NONE;
  attempts: readonly AttemptSpan[] = NONE;
  private current: AttemptSpan | undefined;

  constructor(
    private readonly finished: (trace: RequestTrace) => void,
    readonly parent: ParentContext,
    readonly method: string,
    readonly route: string,
    startedAt: number = performance.now(),
  ) {
    this.start = timeOrigin + startedAt;
  }

  model(model: string): void {
    this.requestModel = model;
  }

  /** The request span's name. */
  get name(): string {
    return `${this.method} ${this.route}`;
  }

  /** Whether it erred: a 5xx, or a stream cut short. */
  get failed(): boolean {
    return this.status >= 500 || this.outcome === 'interrupted';
  }

  routed(facts: RoutedFacts, at: number = performance.now()): void {
    if (this.endedAt !== 0) return;
    const span: RoutedSpan = {
      at: timeOrigin + at,
      instance: facts.instance,
      reason: facts.reason,
      matchedBlocks: facts.matchedBlocks,
      predictedCachedTokens: facts.predictedCachedTokens,
      predictedTtftMs: facts.predictedTtftMs,
      keys: facts.keys,
      policy: facts.policy,
    };
    this.routes = this.routes.length === 0 ? [span] : [...this.routes, span];
  }

  /**
   * An attempt leaves for `instance`: its span, and the `traceparent` the engine gets (with
   * `parent.traceState` as its `tracestate`).
   */
  attempt(instance: string, at: number = performance.now()): string {
    const start = timeOrigin + at;
    this.endAttempt('', '', start);
    const attempt: AttemptSpan = {
      spanId: newSpanId(),
      start,
      end: 0,
      instance,
      number: this.attempts.length + 1,
      status: 0,
      errorType: '',
      errorMessage: '',
      firstByteAt: 0,
    };
    this.attempts = this.attempts.length === 0 ? [attempt] : [...this.attempts, attempt];
    this.current = attempt;
    return traceparentOf(this.parent, attempt.spanId);
  }

  firstByte(at: number = performance.now()): void {
    const time = timeOrigin + at;
    if (this.firstByteAt === 0) this.firstByteAt = time;
    if (this.current !== undefined && this.current.firstByteAt === 0) this.current.firstByteAt = time;
  }

  /** The attempt failed before its answer (a retry may follow). */
  attemptFailed(kind: string, message: string): void {
    this.endAttempt(kind, message, timeOrigin + performance.now());
  }

  end(
    status: number,
    outcome: RequestOutcome,
    usage: UsageCounts | undefined,
    error: string | undefined,
    endedAt: number = performance.now(),
  ): void {
    if (this.endedAt !== 0) return;
    const at = timeOrigin + endedAt;
    if (this.current !== undefined) this.current.status = status;
    if (status >= 500) this.endAttempt(outcome, error ?? '', at);
    else this.endAttempt('', '', at);
    this.status = status;
    this.outcome = outcome;
    this.usage = usage;
    this.error = error ?? '';
    this.endedAt = at;
    if (this.parent.sampled) this.finished(this);
  }

  /** Ends the open attempt, if any, at `at` (its end is the request's when the request ends). */
  private endAttempt(errorType: string, errorMessage: string, at: number): void {
    const attempt = this.current;
    if (attempt === undefined) return;
    this.current = undefined;
    attempt.errorType = errorType;
    attempt.errorMessage = errorMessage;
    attempt.end = at;
  }
}
