// @ts-check
// Runs one workload for every policy, native and TypeScript reference side by
// side in this process, and reports the figures of issue #2 per
// (policy, implementation): p50/p99 µs per route()+complete() pair, decisions
// per second and bytes per indexed block. The offload layer (issue #18) runs
// beside its base for the default policy and the reference experiments' champion, so its cost
// reads off as the difference of two rows.
import { loadavg } from 'node:os';

import { POLICY_NAMES, Router } from '../../dist/index.js';

/** Every base policy, and `<base>+offload` right after each of OFFLOAD_BESIDE. */
const OFFLOAD_BESIDE = ['unified+A+B', 'min_ttft'];
export const BENCH_POLICIES = POLICY_NAMES.flatMap((p) => (OFFLOAD_BESIDE.includes(p) ? [p, `${p}+offload`] : [p]));
import { heapUsed, replay, summarize, timePairs } from './measure.mjs';

/**
 * @typedef {import('./measure.mjs').BenchRequest} BenchRequest
 * @typedef {{
 *   workload: string, policy: string, impl: 'native' | 'ts', instances: number,
 *   p50_us: number, p99_us: number, ops_per_s: number, bytes_per_block: number,
 *   indexed_blocks: number, measured: number, mean_ids: number,
 *   offloaded_share?: number, load_average?: number,
 * }} Result
 * @typedef {{
 *   workload: string, instances: number, blockSize: number, capacityBlocks: number, inFlight: number,
 *   warmup: BenchRequest[], measured: BenchRequest[], measuredTs?: BenchRequest[],
 *   reps: { native: number, ts: number },
 * }} WorkloadSpec
 */

/**
 * @param {WorkloadSpec} spec
 * @param {{ native: boolean }} options
 * @returns {Result[]}
 */
export function runWorkload(spec, options) {
  /** @type {Result[]} */
  const results = [];
  /** @type {ReadonlyArray<'native' | 'ts'>} */
  let impls = options.native ? ['native', 'ts'] : ['ts'];
  // KVROUTE_BENCH_IMPLS=native limits a run (for profiling).
  const onlyImpls = process.env.KVROUTE_BENCH_IMPLS?.split(',');
  if (onlyImpls) impls = impls.filter((i) => onlyImpls.includes(i));
  // KVROUTE_BENCH_POLICIES=unified,sticky limits a run (for profiling).
  const only = process.env.KVROUTE_BENCH_POLICIES?.split(',');
  // One untimed pass per implementation first, so the process is warm (JIT,
  // allocator, page cache) before the first policy is measured and policy
  // order does not matter.
  for (const impl of impls) {
    const router = new Router({
      instances: spec.instances,
      policy: 'unified',
      blockSize: spec.blockSize,
      capacityBlocks: spec.capacityBlocks,
      native: impl === 'native',
    });
    timePairs(
      router,
      impl === 'ts' && spec.measuredTs ? spec.measuredTs : spec.measured,
      replay(router, spec.warmup, spec.inFlight),
    );
  }
  for (const policy of BENCH_POLICIES.filter((p) => !only || only.includes(p))) {
    /** @type {Record<string, { counted: Float64Array[], indexed: number, bytes: number, offloaded: number }>} */
    const state = {};
    // Each repetition replays the workload on a fresh router. The two
    // implementations' repetitions are interleaved, so a noisy moment on a
    // shared machine lands on both rather than skewing their ratio. With more
    // than one repetition, an implementation's first only warms the JIT and
    // is not counted. Memory is read in that first one, after the warm-up and
    // before any timing: native from the indexes' own accounting of their
    // heap (fleet index included), TypeScript from the V8 heap growth between
    // full collections (run with --expose-gc).
    for (const [impl, rep] of interleave(impls, spec.reps)) {
      const measured = impl === 'ts' && spec.measuredTs ? spec.measuredTs : spec.measured;
      const s = (state[impl] ??= { counted: [], indexed: 0, bytes: 0, offloaded: 0 });
      const heapBefore = rep === 0 ? heapUsed() : 0;
      const router = new Router({
        instances: spec.instances,
        policy: /** @type {import('../../dist/index.js').PolicyName} */ (policy),
        blockSize: spec.blockSize,
        capacityBlocks: spec.capacityBlocks,
        native: impl === 'native',
      });
      const open = replay(router, spec.warmup, spec.inFlight);
      if (rep === 0) {
        const stats = router.stats();
        s.indexed = stats.instances.reduce((sum, x) => sum + x.blocks, 0);
        s.bytes =
          impl === 'native'
            ? stats.instances.reduce((sum, x) => sum + (x.bytes ?? 0), stats.fleetBytes ?? 0)
            : heapUsed() - heapBefore;
      }
      const count = { offloaded: 0 };
      const samples = timePairs(router, measured, open, count);
      if (rep > 0 || spec.reps[impl] === 1) {
        s.counted.push(samples);
        s.offloaded += count.offloaded;
      }
    }
    for (const impl of impls) {
      const { counted, indexed, bytes, offloaded } =
        /** @type {{ counted: Float64Array[], indexed: number, bytes: number, offloaded: number }} */ (state[impl]);
      const measured = impl === 'ts' && spec.measuredTs ? spec.measuredTs : spec.measured;
      const timing = summarize(counted);
      const ids = measured.reduce((sum, r) => sum + r.hashIds.length, 0);
      /** @type {Result} */
      const r = {
        workload: spec.workload,
        policy,
        impl,
        instances: spec.instances,
        p50_us: round(timing.p50_us),
        p99_us: round(timing.p99_us),
        ops_per_s: Math.round(timing.ops_per_s),
        bytes_per_block: round(bytes / Math.max(1, indexed)),
        indexed_blocks: indexed,
        measured: timing.measured,
        mean_ids: Math.round(ids / measured.length),
        // How shared the 2 cores were (1 min, after the policy's repetitions).
        load_average: Math.round((loadavg()[0] ?? NaN) * 10) / 10,
      };
      if (policy.endsWith('+offload')) r.offloaded_share = round(offloaded / timing.measured);
      results.push(r);
      console.log(
        `  ${spec.workload.padEnd(14)} ${String(spec.instances).padStart(3)} inst  ${policy.padEnd(20)} ${impl.padEnd(6)} ` +
          `p50 ${fmt(r.p50_us)} µs  p99 ${fmt(r.p99_us)} µs  ${String(r.ops_per_s).padStart(9)}/s  ` +
          `${fmt(r.bytes_per_block)} B/block  (${indexed} blocks indexed, ${r.measured} pairs)`,
      );
    }
  }
  return results;
}

/**
 * The order of repetitions: each implementation's, spread evenly over the
 * run (e.g. 21 native and 6 reference become n n n t n n n t ...).
 * @param {ReadonlyArray<'native' | 'ts'>} impls
 * @param {{ native: number, ts: number }} reps
 * @returns {Array<['native' | 'ts', number]>}
 */
function interleave(impls, reps) {
  /** @type {Array<['native' | 'ts', number, number]>} */
  const slots = [];
  for (const impl of impls) {
    for (let rep = 0; rep < reps[impl]; rep += 1) slots.push([impl, rep, (rep + 0.5) / reps[impl]]);
  }
  return slots.sort((a, b) => a[2] - b[2]).map(([impl, rep]) => [impl, rep]);
}

/** @param {number} x */
const round = (x) => Math.round(x * 1000) / 1000;
/** @param {number} x */
const fmt = (x) => x.toFixed(x < 10 ? 2 : 1).padStart(8);
