// @ts-check
// The public Mooncake trace (data/, 3,993 requests, 512-token blocks) as bench requests, and the
// per-instance capacity derived for it: an H20 (96 GiB) at vLLM's gpu_memory_utilization 0.9,
// minus Qwen3-Coder-30B-A3B's bf16 weights (30.5 B params), at the reference experiments' 98,304 KV bytes per
// token, in 512-token blocks.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const TRACE_CANDIDATES = [
  process.env.KVROUTE_MOONCAKE_TRACE,
  join(here, '..', '..', 'data', 'mooncake_synthetic_trace.jsonl'),
].filter((p) => typeof p === 'string');

const GIB = 2 ** 30;
const KV_BYTES = 96 * GIB * 0.9 - 30.5e9 * 2;
export const MOONCAKE_BLOCK_TOKENS = 512;
export const MOONCAKE_CAPACITY_BLOCKS = Math.floor(KV_BYTES / 98_304 / MOONCAKE_BLOCK_TOKENS);

/** @returns {{ path: string, requests: import('./measure.mjs').BenchRequest[] }} */
export function loadMooncakeTrace() {
  const path = TRACE_CANDIDATES.find((p) => existsSync(/** @type {string} */ (p)));
  if (!path) throw new Error(`mooncake trace not found; tried ${TRACE_CANDIDATES.join(', ')}`);
  const requests = readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const r = JSON.parse(line);
      return { hashIds: BigUint64Array.from(r.hash_ids, BigInt), inputTokens: r.input_length };
    });
  return { path: /** @type {string} */ (path), requests };
}
