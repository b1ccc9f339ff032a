// @ts-check
// Workload (issue #3): characterization of a generated 1M-request trace. `kvroute trace synth`
// writes the trace (512-token blocks: at the default 16 a million ~44k-token agentic requests
// would be 2.7 billion ids, a ~20 GB file), then `analyze trace` runs on it in a fresh process,
// once with the default Piscina workers and once in a single thread (the addon's prefix trie),
// then with the default workers on the TypeScript trie (KVROUTE_NATIVE=0, the reference), each
// reporting its wall time and peak RSS (main thread and workers: one process). Targets (the
// addon's legs): ≤ 60 s, ≤ 2 GiB.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { workloadMain } from './lib/cli.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', 'dist', 'cli.js');
const child = join(here, 'lib', 'characterize-child.mjs');

/**
 * @typedef {{
 *   workload: 'characterize', kind: 'analysis', workers: number | 'default', requests: number,
 *   blocks: number, file_bytes: number, generate_s: number, seconds: number, peak_rss_bytes: number,
 *   trie?: 'native' | 'typescript',
 * }} AnalysisResult
 */

/** @param {string[]} args @param {NodeJS.ProcessEnv} [env] */
function run(args, env = process.env) {
  const result = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 26, env });
  if (result.status !== 0) throw new Error(`${args.join(' ')} failed (${result.status}): ${result.stderr}`);
  return result.stdout;
}

workloadMain('characterize', ({ quick }) => {
  // The calibrated defaults give ~1,240 requests per unit of scale: 850 gives ~1.05M.
  const scale = quick ? 85 : 850;
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-bench-trace-'));
  try {
    const trace = join(dir, 'synth.jsonl');
    const started = performance.now();
    run([cli, 'trace', 'synth', '--scale', String(scale), '--block-size', '512', '-o', trace]);
    const generate = (performance.now() - started) / 1000;
    const bytes = statSync(trace).size;
    console.log(
      `  generated ${(bytes / 2 ** 20).toFixed(0)} MiB (--scale ${scale} --block-size 512) in ${generate.toFixed(1)} s`,
    );
    /** @type {AnalysisResult[]} */
    const results = [];
    for (const [workers, trie] of /** @type {const} */ ([
      ['default', 'native'],
      ['0', 'native'],
      ['default', 'typescript'],
    ])) {
      const env = trie === 'native' ? process.env : { ...process.env, KVROUTE_NATIVE: '0' };
      const figures = JSON.parse(run(['--expose-gc', child, trace, workers], env));
      console.log(
        `  analyze trace, ${trie} trie, workers ${workers === '0' ? '0 (one thread)' : `${figures.workers} (default)`}: ` +
          `${figures.requests.toLocaleString('en-US')} requests, ${figures.blocks.toLocaleString('en-US')} blocks in ` +
          `${figures.seconds.toFixed(1)} s, peak RSS ${(figures.peak_rss_bytes / 2 ** 20).toFixed(0)} MiB`,
      );
      results.push({
        workload: 'characterize',
        kind: 'analysis',
        workers: workers === '0' ? 0 : figures.workers,
        requests: figures.requests,
        blocks: figures.blocks,
        file_bytes: bytes,
        generate_s: generate,
        seconds: figures.seconds,
        peak_rss_bytes: figures.peak_rss_bytes,
        trie,
      });
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
