/**
 * The metrics of a run, from its per-request records (the B3 definitions):
 * - TTFT = first_token − dispatch; E2E = finish − dispatch; TPOT = (finish − first_token) ÷
 *   (output_tokens − 1), for requests with more than one output token;
 * - APC = Σ cached_tokens ÷ Σ input_tokens;
 * - interference_index = TPOT p90 of requests whose decode overlapped a same-worker prefill ÷
 *   TPOT p90 of the others (null when either group is empty);
 * - hotspot_index = max over instances of TTFT p90 ÷ median over instances of TTFT p90;
 * - instances_per_session = mean number of distinct instances a session's requests went to;
 * - per_instance: requests and TTFT p90 of each instance (the hotspot index's inputs).
 * A failed request (a live one with an `error`, or a status other than 200) counts in `requests`
 * and `failed` and nowhere else: it has no latency, no cache figure and no decode.
 */
import type { RequestRecord } from '../trace/records.js';
import { percentileOfSorted } from './percentiles.js';

export interface Quantiles {
  p50: number;
  p90: number;
  p99: number;
}

export interface InstanceMetrics {
  instance: number;
  /** Requests that succeeded on it. */
  requests: number;
  ttft_p90_s: number;
}

export interface RunMetrics {
  requests: number;
  /** Live requests that failed: excluded from every other figure. */
  failed: number;
  ttft_s: Quantiles;
  tpot_ms: Quantiles;
  e2e_s: Quantiles;
  apc: number;
  interference_index: number | null;
  hotspot_index: number | null;
  instances_per_session: number;
  preempted_requests: number;
  per_instance: InstanceMetrics[];
}

/** A live request that got no answer, or an error status. */
export function isFailed(r: RequestRecord): boolean {
  return r.error !== undefined || (r.status !== undefined && r.status !== 200);
}

function sorted(values: number[]): Float64Array {
  return new Float64Array(values).sort();
}

function quantiles(values: number[]): Quantiles {
  const s = sorted(values);
  return { p50: percentileOfSorted(s, 50), p90: percentileOfSorted(s, 90), p99: percentileOfSorted(s, 99) };
}

const p90 = (values: number[]): number => percentileOfSorted(sorted(values), 90);

export function runMetrics(records: readonly RequestRecord[]): RunMetrics {
  const ttft: number[] = [];
  const e2e: number[] = [];
  const tpot: number[] = [];
  const tpotOverlapped: number[] = [];
  const tpotClean: number[] = [];
  const ttftByInstance = new Map<number, number[]>();
  // A session's instance, or its distinct instances once it has more than one (few do).
  const instancesBySession = new Map<string, number | Set<number>>();
  let cached = 0;
  let input = 0;
  let preempted = 0;
  let failed = 0;
  for (const r of records) {
    if (isFailed(r)) {
      failed++;
      continue;
    }
    const firstToken = r.first_token - r.dispatch;
    ttft.push(firstToken);
    e2e.push(r.finish - r.dispatch);
    if (r.output_tokens > 1) {
      const perToken = ((r.finish - r.first_token) / (r.output_tokens - 1)) * 1000;
      tpot.push(perToken);
      (r.overlapped ? tpotOverlapped : tpotClean).push(perToken);
    }
    if (r.instance >= 0) {
      // -1: no instance answered; not a worker of its own.
      let instanceTtft = ttftByInstance.get(r.instance);
      if (instanceTtft === undefined) ttftByInstance.set(r.instance, (instanceTtft = []));
      instanceTtft.push(firstToken);
    }
    const seen = instancesBySession.get(r.session);
    if (seen === undefined) instancesBySession.set(r.session, r.instance);
    else if (typeof seen !== 'number') seen.add(r.instance);
    else if (seen !== r.instance) instancesBySession.set(r.session, new Set([seen, r.instance]));
    cached += r.cached_tokens;
    input += r.input_tokens;
    if (r.preemptions > 0) preempted++;
  }
  const perInstance = [...ttftByInstance.entries()]
    .sort(([a], [b]) => a - b)
    .map(([instance, values]) => ({ instance, requests: values.length, ttft_p90_s: p90(values) }));
  const workerP90 = sorted(perInstance.map((i) => i.ttft_p90_s));
  const medianWorker = percentileOfSorted(workerP90, 50);
  const cleanP90 = tpotClean.length === 0 ? 0 : p90(tpotClean);
  let perSession = 0;
  for (const instances of instancesBySession.values()) perSession += typeof instances === 'number' ? 1 : instances.size;
  return {
    requests: records.length,
    failed,
    ttft_s: quantiles(ttft),
    tpot_ms: quantiles(tpot),
    e2e_s: quantiles(e2e),
    apc: input === 0 ? 0 : cached / input,
    interference_index: tpotOverlapped.length === 0 || cleanP90 === 0 ? null : p90(tpotOverlapped) / cleanP90,
    hotspot_index:
      workerP90.length === 0 || medianWorker === 0 ? null : workerP90[workerP90.length - 1]! / medianWorker,
    instances_per_session: instancesBySession.size === 0 ? 0 : perSession / instancesBySession.size,
    preempted_requests: preempted,
    per_instance: perInstance,
  };
}
