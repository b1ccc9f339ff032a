/**
 * Slow requests of a run and their causes (the B3 failure breakdown): every request that
 * misses the SLO gets exactly one label, by the first rule that holds, in this order:
 *
 * 1. `same_worker_overlap` — it decoded (more than one output token) and another request's
 *    prefill ran on the same instance during its decode: some other request's
 *    [dispatch, first_token] intersects its (first_token, finish) with positive length. The
 *    simulator's `overlapped` flag counts too. (The B3 definition, any prefill size.)
 * 2. `hot_worker_queue` — when it was dispatched, its instance already held at least
 *    `hotMinInFlight` requests in flight (dispatched before, finishing after), and more than
 *    `hotFactor` × the fleet's mean in flight per instance (unified's overload gate, 2.0); or,
 *    given the replay's engine-state log, its latest sample (≤ 2 s old) had at least
 *    `hotMinWaiting` requests waiting and more than `hotFactor` × the fleet's mean waiting.
 * 3. `cache_miss_large_append` — cached ÷ input < `missHitRatio` (0.5, the affinity gate) and
 *    the uncached append, input − cached, is at least `missMinAppend` tokens (1024: the reference experiments'
 *    "cold prefill > ~1000 tokens").
 * 4. `unknown` — none of these.
 *
 * Slow: TTFT > `slo.ttft_s`, or TPOT (requests with more than one output token) >
 * `slo.tpot_ms`; both strict. Failed requests are neither slow nor timelines' prefills, but
 * they count as in flight. Rules in full, with the default SLO: docs/analysis.md.
 *
 * Cost: per instance, requests sorted by dispatch with a running maximum of first_token (the
 * overlap query is a binary search) and sorted dispatch/finish times (in-flight counts by
 * binary search): O(n log n) time, a few typed arrays of n entries.
 */
import { invalidValue } from '../core/errors.js';
import type { RequestRecord } from '../trace/records.js';
import type { EngineStates } from './engine-state-samples.js';
import { isFailed } from './run-metrics.js';

export interface Slo {
  ttft_s: number;
  tpot_ms: number;
}

/**
 * The reference experiments state no SLO numbers; these are kvroute's defaults (docs/analysis.md): an agentic
 * turn that waits over 5 s for its first token, or streams slower than 10 tokens/s, is slow.
 */
export const DEFAULT_SLO: Slo = { ttft_s: 5, tpot_ms: 100 };

export const SLOW_RULES = {
  hotMinInFlight: 2,
  hotFactor: 2.0,
  hotMinWaiting: 1,
  missHitRatio: 0.5,
  missMinAppend: 1024,
} as const;

export const SLOW_CAUSES = ['same_worker_overlap', 'hot_worker_queue', 'cache_miss_large_append', 'unknown'] as const;
export type SlowCause = (typeof SLOW_CAUSES)[number];

export interface SlowSummary {
  slo: Slo;
  rules: typeof SLOW_RULES;
  n_slow: number;
  causes: Record<SlowCause, number>;
}

/** Index of the first element of sorted `a` that is ≥ x (strict: > x). */
function bound(a: Float64Array, x: number, strict: boolean): number {
  let low = 0;
  let high = a.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if (strict ? a[mid]! <= x : a[mid]! < x) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** `field` of the records at `indices`, sorted (a loop: Float64Array.from's iterator costs ~5×). */
function sortedField(
  records: readonly RequestRecord[],
  indices: ArrayLike<number>,
  field: 'dispatch' | 'finish',
): Float64Array {
  const values = new Float64Array(indices.length);
  for (let k = 0; k < indices.length; k++) values[k] = records[indices[k]!]![field];
  return values.sort();
}

/** In flight at t: dispatched before t and finishing after it. */
class InFlight {
  private readonly dispatch: Float64Array;
  private readonly finish: Float64Array;
  constructor(records: readonly RequestRecord[], indices: ArrayLike<number>) {
    this.dispatch = sortedField(records, indices, 'dispatch');
    this.finish = sortedField(records, indices, 'finish');
  }
  /** Requests with dispatch < t < finish (a request with dispatch = finish = t is not counted). */
  at(t: number): number {
    const started = bound(this.dispatch, t, false);
    const done = bound(this.finish, t, true);
    return Math.max(0, started - done);
  }
}

/** One instance's prefills, by start, with the latest end among those started so far. */
class Prefills {
  private readonly start: Float64Array;
  private readonly maxEnd: Float64Array;
  constructor(records: readonly RequestRecord[], indices: number[]) {
    const ok = indices.filter((i) => !isFailed(records[i]!));
    const starts = new Float64Array(ok.length);
    for (let k = 0; k < ok.length; k++) starts[k] = records[ok[k]!]!.dispatch;
    const order = new Uint32Array(ok.length);
    for (let k = 0; k < ok.length; k++) order[k] = k;
    order.sort((a, b) => starts[a]! - starts[b]!);
    this.start = new Float64Array(ok.length);
    this.maxEnd = new Float64Array(ok.length);
    let max = -Infinity;
    for (let k = 0; k < ok.length; k++) {
      const r = records[ok[order[k]!]!]!;
      this.start[k] = r.dispatch;
      this.maxEnd[k] = max = Math.max(max, r.first_token);
    }
  }
  /** Does some prefill [start, end] intersect (from, to) with positive length? */
  overlaps(from: number, to: number): boolean {
    const k = bound(this.start, to, false);
    return k > 0 && this.maxEnd[k - 1]! > from;
  }
}

export function isSlow(r: RequestRecord, slo: Slo): boolean {
  if (isFailed(r)) return false;
  if (r.first_token - r.dispatch > slo.ttft_s) return true;
  return r.output_tokens > 1 && ((r.finish - r.first_token) / (r.output_tokens - 1)) * 1000 > slo.tpot_ms;
}

/**
 * Labels every slow request. `instances`: the fleet size (the header's), for the mean in flight
 * per instance; default the number of instances the records name.
 */
export function labelSlowRequests(
  records: readonly RequestRecord[],
  slo: Slo = DEFAULT_SLO,
  instances?: number,
  engineStates?: EngineStates,
): { labels: Map<number, SlowCause>; summary: SlowSummary } {
  const byInstance = new Map<number, number[]>();
  const placed: number[] = [];
  for (let i = 0; i < records.length; i++) {
    const instance = records[i]!.instance;
    if (instance < 0) continue;
    let list = byInstance.get(instance);
    if (list === undefined) byInstance.set(instance, (list = []));
    list.push(i);
    placed.push(i);
  }
  const fleetSize = Math.max(instances ?? 0, byInstance.size, 1);
  const fleet = new InFlight(records, placed);
  const timelines = new Map(
    [...byInstance].map(([k, v]) => [k, { prefills: new Prefills(records, v), inFlight: new InFlight(records, v) }]),
  );
  const labels = new Map<number, SlowCause>();
  const causes = Object.fromEntries(SLOW_CAUSES.map((c) => [c, 0])) as Record<SlowCause, number>;
  records.forEach((r, i) => {
    if (!isSlow(r, slo)) return;
    const cause = causeOf(r, timelines.get(r.instance), fleet.at(r.dispatch) / fleetSize, engineStates);
    labels.set(i, cause);
    causes[cause]++;
  });
  return { labels, summary: { slo, rules: SLOW_RULES, n_slow: labels.size, causes } };
}

function causeOf(
  r: RequestRecord,
  timeline: { prefills: Prefills; inFlight: InFlight } | undefined,
  fleetMean: number,
  engineStates: EngineStates | undefined,
): SlowCause {
  if (timeline !== undefined) {
    if (r.overlapped || (r.output_tokens > 1 && timeline.prefills.overlaps(r.first_token, r.finish)))
      return 'same_worker_overlap';
    const queue = timeline.inFlight.at(r.dispatch);
    if (queue >= SLOW_RULES.hotMinInFlight && queue > SLOW_RULES.hotFactor * fleetMean) return 'hot_worker_queue';
    const waiting = engineStates?.waitingAt(r.instance, r.dispatch);
    if (
      waiting !== undefined &&
      waiting >= SLOW_RULES.hotMinWaiting &&
      waiting > SLOW_RULES.hotFactor * engineStates!.meanWaitingAt(r.dispatch)
    )
      return 'hot_worker_queue';
  }
  const uncached = r.input_tokens - r.cached_tokens;
  if (
    r.input_tokens > 0 &&
    r.cached_tokens / r.input_tokens < SLOW_RULES.missHitRatio &&
    uncached >= SLOW_RULES.missMinAppend
  )
    return 'cache_miss_large_append';
  return 'unknown';
}

/** `ttft=5s,tpot=100ms` (units s or ms; a bare TTFT is seconds, a bare TPOT milliseconds). */
export function parseSlo(text: string): Slo {
  const slo = { ...DEFAULT_SLO };
  for (const part of text.split(',')) {
    const match = /^\s*(ttft|tpot)\s*=\s*(\d+(?:\.\d+)?)\s*(s|ms)?\s*$/.exec(part);
    const value = Number(match?.[2]);
    if (match === null || !(value > 0))
      throw invalidValue(
        '--slo',
        'ttft=SECONDS,tpot=MILLISECONDS, positive, units s or ms (e.g. ttft=5s,tpot=100ms)',
        part,
      );
    if (match[1] === 'ttft') slo.ttft_s = match[3] === 'ms' ? value / 1000 : value;
    else slo.tpot_ms = match[3] === 's' ? value * 1000 : value;
  }
  return slo;
}
