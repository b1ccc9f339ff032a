// @ts-check
// Workload (a): the real public Mooncake trace (data/, 3,993
// requests, 512-token blocks) replayed over 8 instances. The first 1,000
// requests warm the caches untimed; the remaining 2,993 are timed.
//
// Capacity per instance is derived, not picked: an H20 (96 GiB) at vLLM's
// gpu_memory_utilization 0.9, minus Qwen3-Coder-30B-A3B's bf16 weights
// (30.5 B params), at the seeds' 98,304 KV bytes per token, in 512-token blocks.
import { readFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { runWorkload } from './lib/workload.mjs';
import { workloadMain } from './lib/cli.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const TRACE_CANDIDATES = [
  process.env.KVROUTE_MOONCAKE_TRACE,
  join(here, '..', 'data', 'mooncake_synthetic_trace.jsonl'),
].filter((p) => typeof p === 'string');

const GIB = 2 ** 30;
const KV_BYTES = 96 * GIB * 0.9 - 30.5e9 * 2;
const BLOCK_TOKENS = 512;
const CAPACITY_BLOCKS = Math.floor(KV_BYTES / 98_304 / BLOCK_TOKENS);

workloadMain('mooncake', (options) => {
  const path = TRACE_CANDIDATES.find((p) => existsSync(/** @type {string} */ (p)));
  if (!path) throw new Error(`mooncake trace not found; tried ${TRACE_CANDIDATES.join(', ')}`);
  const requests = readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const r = JSON.parse(line);
      return { hashIds: BigUint64Array.from(r.hash_ids, BigInt), inputTokens: r.input_length };
    });
  const warm = Math.min(1000, Math.floor(requests.length / 4));
  console.log(`  trace ${path}: ${requests.length} requests; capacity ${CAPACITY_BLOCKS} blocks/instance`);
  return runWorkload(
    {
      workload: 'mooncake',
      instances: 8,
      blockSize: BLOCK_TOKENS,
      capacityBlocks: CAPACITY_BLOCKS,
      inFlight: 64,
      warmup: requests.slice(0, warm),
      measured: requests.slice(warm),
      reps: options.quick ? { native: 3, ts: 2 } : { native: 21, ts: 6 },
    },
    options,
  );
});
