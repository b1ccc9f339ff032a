// @ts-check
// Workload (a): the real public Mooncake trace (data/, 3,993
// requests, 512-token blocks) replayed over 8 instances. The first 1,000
// requests warm the caches untimed; the remaining 2,993 are timed.
// Capacity per instance is derived, not picked (lib/mooncake-trace.mjs).
import { workloadMain } from './lib/cli.mjs';
import { loadMooncakeTrace, MOONCAKE_BLOCK_TOKENS, MOONCAKE_CAPACITY_BLOCKS } from './lib/mooncake-trace.mjs';
import { runWorkload } from './lib/workload.mjs';

workloadMain('mooncake', (options) => {
  const { path, requests } = loadMooncakeTrace();
  const warm = Math.min(1000, Math.floor(requests.length / 4));
  console.log(`  trace ${path}: ${requests.length} requests; capacity ${MOONCAKE_CAPACITY_BLOCKS} blocks/instance`);
  return runWorkload(
    {
      workload: 'mooncake',
      instances: 8,
      blockSize: MOONCAKE_BLOCK_TOKENS,
      capacityBlocks: MOONCAKE_CAPACITY_BLOCKS,
      inFlight: 64,
      warmup: requests.slice(0, warm),
      measured: requests.slice(warm),
      reps: options.quick ? { native: 3, ts: 2 } : { native: 21, ts: 6 },
    },
    options,
  );
});
