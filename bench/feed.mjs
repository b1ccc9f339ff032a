// @ts-check
// Workload (issue #5): what the shared-memory engine-state feed costs the router.
// - route() + complete() on the Mooncake trace over 8 instances (native), with the feed on
//   (every instance has a fresh snapshot, read on every decision) and off, in alternating
//   repetitions so drift hits both alike. The median over repetitions of the paired p50
//   difference is the feed's cost per decision.
//   Target: <= 100 ns.
// - One slot read through the addon's reader from JavaScript (Node-API call included; the
//   router's own reads happen inside the addon without that crossing).
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Router } from '../dist/index.js';
import { loadNative } from '../dist/core/native.js';
import { StateFeedWriter } from '../dist/state/shm-feed.js';
import { workloadMain } from './lib/cli.mjs';
import { replay, summarize, timePairs } from './lib/measure.mjs';
import { loadMooncakeTrace, MOONCAKE_BLOCK_TOKENS, MOONCAKE_CAPACITY_BLOCKS } from './lib/mooncake-trace.mjs';

/**
 * @typedef {{
 *   workload: 'feed', kind: 'feed', policy: string, instances: number,
 *   off_p50_us: number, on_p50_us: number, overhead_ns: number, slot_read_ns: number,
 * }} FeedResult
 */

const INSTANCES = 8;
const POLICIES = /** @type {const} */ (['unified+A+B', 'lmetric', 'load_only']);

workloadMain('feed', ({ quick, native }) => {
  if (!native) throw new Error('the feed workload needs the native addon');
  const dir = mkdtempSync(join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), 'kvroute-bench-feed-'));
  const path = join(dir, 'feed');
  const writer = new StateFeedWriter(path, { slots: INSTANCES });
  const publishAll = () => {
    for (let slot = 0; slot < INSTANCES; slot++)
      // All-zero counts: max(shadow, 0) is the shadow, so the decisions (and with them the index
      // work) are the same with the feed on and off, and the difference is the feed alone.
      writer.publish(slot, `engine-${slot}`, {
        running: 0,
        waiting: 0,
        kvBlocksUsed: 0,
        kvBlocksTotal: MOONCAKE_CAPACITY_BLOCKS,
        pendingPrefillTokens: 0,
        maxPrefillRemaining: 0,
        decodeBatch: 0,
      });
  };
  try {
    const { requests } = loadMooncakeTrace();
    const warm = requests.slice(0, 1000);
    const measured = requests.slice(1000);
    const reps = quick ? 3 : 41;
    /** @type {FeedResult[]} */
    const results = [];
    publishAll();
    const slotReadNs = timeSlotReads(path, quick ? 200_000 : 2_000_000);
    for (const policy of POLICIES) {
      /** @type {{ on: Float64Array[], off: Float64Array[] }} */
      const runs = { on: [], off: [] };
      for (let rep = 0; rep <= reps; rep++) {
        for (const mode of /** @type {const} */ (['off', 'on'])) {
          publishAll(); // fresh snapshots (well inside the 2 s staleness) for this repetition
          const router = new Router({
            instances: INSTANCES,
            policy,
            blockSize: MOONCAKE_BLOCK_TOKENS,
            capacityBlocks: MOONCAKE_CAPACITY_BLOCKS,
            ...(mode === 'on' ? { engineState: { shm: path } } : {}),
          });
          const open = replay(router, warm, 64);
          const samples = timePairs(router, measured, open);
          if (rep > 0) runs[mode].push(samples); // the first repetition warms up
        }
      }
      const off = summarize(runs.off).p50_us;
      const on = summarize(runs.on).p50_us;
      // The feed's cost is the median over repetitions of (on p50 − off p50), each pair run back to
      // back, so a burst of load from elsewhere on the machine shifts one pair, not the figure.
      const paired = runs.on.map(
        (samples, k) => summarize([samples]).p50_us - summarize([/** @type {Float64Array} */ (runs.off[k])]).p50_us,
      );
      const overheadNs = median(paired) * 1000;
      const result = {
        workload: /** @type {const} */ ('feed'),
        kind: /** @type {const} */ ('feed'),
        policy,
        instances: INSTANCES,
        off_p50_us: off,
        on_p50_us: on,
        overhead_ns: overheadNs,
        slot_read_ns: slotReadNs,
      };
      console.log(
        `  feed ${policy.padEnd(12)} ${INSTANCES} inst  off p50 ${off.toFixed(3)} µs  on p50 ${on.toFixed(3)} µs  feed +${result.overhead_ns.toFixed(0)} ns/decision`,
      );
      results.push(result);
    }
    console.log(`  feed slot read from JavaScript (Node-API included): ${slotReadNs.toFixed(0)} ns`);
    return results;
  } finally {
    writer.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

/** @param {number[]} values */
function median(values) {
  const sorted = Float64Array.from(values).sort();
  const mid = sorted.length >> 1;
  const at = (/** @type {number} */ i) => /** @type {number} */ (sorted[i]);
  return sorted.length % 2 === 1 ? at(mid) : (at(mid - 1) + at(mid)) / 2;
}

/**
 * ns per read of one slot through the addon's reader, called from JavaScript.
 * @param {string} path
 * @param {number} count
 */
function timeSlotReads(path, count) {
  const reader = new (loadNative().FeedReader)(path, 100);
  const out = new Float64Array(11);
  let found = 0;
  for (let i = 0; i < 100_000; i++) if (reader.read(i & 7, out) !== null) found++; // warm-up
  const t0 = performance.now();
  for (let i = 0; i < count; i++) if (reader.read(i & 7, out) !== null) found++;
  const ns = ((performance.now() - t0) * 1e6) / count;
  reader.close();
  if (found === 0) throw new Error('the feed workload read no snapshot');
  return ns;
}
