// @ts-check
// Timing of route()+complete() pairs against a router replaying a request
// stream with a fixed number of requests in flight, so load-aware policies see
// real, moving load (not an idle fleet).
import { performance } from 'node:perf_hooks';

/**
 * @typedef {{ hashIds: BigUint64Array, session?: string, inputTokens: number }} BenchRequest
 * @typedef {{ p50_us: number, p99_us: number, ops_per_s: number, measured: number }} Timing
 */

const gc = /** @type {(() => void) | undefined} */ (globalThis.gc);

/** Forces a full collection when node runs with --expose-gc. */
export function collect() {
  if (gc) {
    gc();
    gc();
  }
}

/** Heap bytes in use after a full collection (needs --expose-gc to be exact). */
export function heapUsed() {
  collect();
  return process.memoryUsage().heapUsed;
}

/** The cost of one performance.now() pair, in µs (median of many). */
export function timerOverheadUs() {
  const samples = new Float64Array(10_001);
  for (let k = 0; k < samples.length; k += 1) {
    const t0 = performance.now();
    samples[k] = performance.now() - t0;
  }
  samples.sort();
  return /** @type {number} */ (samples[5_000]) * 1000;
}

/**
 * Replays `requests` without timing (warm-up), keeping `inFlight` open.
 * @param {import('../../dist/index.js').Router} router
 * @param {BenchRequest[]} requests
 * @param {number} inFlight
 * @returns {number[]} the tickets still open
 */
export function replay(router, requests, inFlight) {
  /** @type {number[]} */
  const open = [];
  const layered = router.policy.offload !== null;
  for (const request of requests) {
    open.push(router.route(request));
    if (layered) closePrefill(router);
    if (open.length > inFlight) {
      const ticket = /** @type {number} */ (open.shift());
      router.onFirstToken(ticket);
      router.complete(ticket);
    }
  }
  return open;
}

/**
 * An offloaded request's prefill phase ends at once: its ticket on the prefill instance is
 * completed (the decode's stays open like any request's).
 * @param {import('../../dist/index.js').Router} router
 * @returns {boolean} whether the last decision offloaded
 */
function closePrefill(router) {
  const prefill = router.decision.offload.prefillTicket;
  if (prefill < 0) return false;
  router.complete(prefill);
  return true;
}

/** Measured once per process: the cost of the timer pair around each step. */
let timerCost = -1;

/**
 * Times each route() of `requests` together with the complete() of the oldest
 * open request (its first token is signalled untimed, half-way through its
 * life in flight, so the fleet holds both waiting and decoding requests).
 * With the offload layer, an offloaded request's prefill ticket is completed
 * inside the timed pair: the layer's whole cost is in the sample.
 * Each sample is net of the timer's own cost (timerOverheadUs), which is the
 * same for every implementation and is not routing work.
 * @param {import('../../dist/index.js').Router} router
 * @param {BenchRequest[]} requests
 * @param {number[]} open tickets already in flight (from replay)
 * @param {{ offloaded: number }} [count] counts the requests the offload layer offloaded
 * @returns {Float64Array} µs per pair
 */
export function timePairs(router, requests, open, count) {
  if (timerCost < 0) timerCost = timerOverheadUs();
  const samples = new Float64Array(requests.length);
  const half = Math.max(1, Math.floor(open.length / 2));
  const layered = router.policy.offload !== null;
  for (let k = 0; k < requests.length; k += 1) {
    const oldest = /** @type {number} */ (open.shift());
    const t0 = performance.now();
    const ticket = router.route(/** @type {BenchRequest} */ (requests[k]));
    const offloaded = layered && closePrefill(router);
    router.complete(oldest);
    samples[k] = Math.max(0, (performance.now() - t0) * 1000 - timerCost);
    if (offloaded && count) count.offloaded += 1;
    open.push(ticket);
    router.onFirstToken(/** @type {number} */ (open[open.length - 1 - half] ?? ticket));
  }
  return samples;
}

/**
 * Percentiles and throughput over the samples of all counted repetitions.
 * @param {Float64Array[]} runs
 * @returns {Timing}
 */
export function summarize(runs) {
  const all = new Float64Array(runs.reduce((n, r) => n + r.length, 0));
  let at = 0;
  for (const r of runs) {
    all.set(r, at);
    at += r.length;
  }
  const total = all.reduce((a, b) => a + b, 0);
  all.sort();
  const q = (/** @type {number} */ p) =>
    /** @type {number} */ (all[Math.min(all.length - 1, Math.floor(p * all.length))]);
  return { p50_us: q(0.5), p99_us: q(0.99), ops_per_s: all.length / (total / 1e6), measured: all.length };
}
