// @ts-check
// Workload (b): long-context agentic sessions (bench/lib/agentic.mjs), 16-token
// blocks, about 3,000 ids per request, over 8 and over 64 instances. Historic
// sessions fill the caches to more than 1M indexed blocks before timing, and
// the total capacity (1.2M blocks) is below what the workload inserts, so the
// caches evict throughout.
import { agenticWorkload } from './lib/agentic.mjs';
import { workloadMain } from './lib/cli.mjs';
import { runWorkload } from './lib/workload.mjs';

const TOTAL_CAPACITY = 1_200_000;

workloadMain('agentic-long', ({ quick, native }) => {
  const measuredCount = quick ? 600 : 3000;
  const { warmup, measured } = agenticWorkload({
    seed: 7,
    historicSessions: 560,
    requests: measuredCount,
    concurrentSessions: 48,
  });
  const results = [];
  for (const instances of [8, 64]) {
    results.push(
      ...runWorkload(
        {
          workload: 'agentic-long',
          instances,
          blockSize: 16,
          capacityBlocks: Math.ceil(TOTAL_CAPACITY / instances),
          inFlight: instances * 4,
          warmup,
          measured,
          // The reference spends milliseconds per request here; a shorter
          // prefix of the same stream keeps the run short.
          measuredTs: measured.slice(0, quick ? 150 : 600),
          reps: quick ? { native: 2, ts: 1 } : { native: 3, ts: 2 },
        },
        { native },
      ),
    );
  }
  return results;
});
