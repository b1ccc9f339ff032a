// @ts-check
// Runs one workload for every policy, native and TypeScript reference side by
// side in this process, and reports the figures of issue #2 per
// (policy, implementation): p50/p99 µs per route()+complete() pair, decisions
// per second and bytes per indexed block.
import { POLICY_NAMES, Router } from '../../dist/index.js';
import { heapUsed, replay, summarize, timePairs } from './measure.mjs';

/**
 * @typedef {import('./measure.mjs').BenchRequest} BenchRequest
 * @typedef {{
 *   workload: string, policy: string, impl: 'native' | 'ts', instances: number,
 *   p50_us: number, p99_us: number, ops_per_s: number, bytes_per_block: number,
 *   indexed_blocks: number, measured: number, mean_ids: number,
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
  for (const policy of POLICY_NAMES.filter((p) => !only || only.includes(p))) {
    for (const impl of impls) {
      const measured = impl === 'ts' && spec.measuredTs ? spec.measuredTs : spec.measured;
      const makeRouter = () =>
        new Router({
          instances: spec.instances,
          policy,
          blockSize: spec.blockSize,
          capacityBlocks: spec.capacityBlocks,
          native: impl === 'native',
        });
      // Each repetition replays the workload on a fresh router. With more
      // than one, the first only warms the JIT and is not counted. Memory is
      // read in the first, after the warm-up and before any timing: native
      // from the indexes' own accounting of their heap (fleet index
      // included), TypeScript from the V8 heap growth between full
      // collections (run with --expose-gc).
      const reps = spec.reps[impl];
      /** @type {Float64Array[]} */
      const counted = [];
      let indexed = 0;
      let bytes = 0;
      for (let rep = 0; rep < reps; rep += 1) {
        const heapBefore = rep === 0 ? heapUsed() : 0;
        const router = makeRouter();
        const open = replay(router, spec.warmup, spec.inFlight);
        if (rep === 0) {
          const stats = router.stats();
          indexed = stats.instances.reduce((sum, s) => sum + s.blocks, 0);
          bytes =
            impl === 'native'
              ? stats.instances.reduce((sum, s) => sum + (s.bytes ?? 0), stats.fleetBytes ?? 0)
              : heapUsed() - heapBefore;
        }
        const samples = timePairs(router, measured, open);
        if (rep > 0 || reps === 1) counted.push(samples);
      }
      const timing = summarize(counted);
      const ids = measured.reduce((sum, r) => sum + r.hashIds.length, 0);
      results.push({
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
      });
      const r = /** @type {Result} */ (results[results.length - 1]);
      console.log(
        `  ${spec.workload.padEnd(14)} ${String(spec.instances).padStart(3)} inst  ${policy.padEnd(16)} ${impl.padEnd(6)} ` +
          `p50 ${fmt(r.p50_us)} µs  p99 ${fmt(r.p99_us)} µs  ${String(r.ops_per_s).padStart(9)}/s  ` +
          `${fmt(r.bytes_per_block)} B/block  (${indexed} blocks indexed, ${r.measured} pairs)`,
      );
    }
  }
  return results;
}

/** @param {number} x */
const round = (x) => Math.round(x * 1000) / 1000;
/** @param {number} x */
const fmt = (x) => x.toFixed(x < 10 ? 2 : 1).padStart(8);
