// @ts-check
// Workload (issue #15): `kvroute analyze run` on 1M records. `kvroute trace synth` writes a
// ~1M-request trace (512-token blocks, as the characterize workload), and a generator turns
// each request into a record with a plausible timeline (8 instances by session, TTFT growing
// with the uncached tokens, so some requests are slow for each cause) under a header carrying
// the trace's fingerprint. A fresh process then runs what `analyze run --json` runs, with the
// reuse split (the trace walk, on the addon's prefix trie) and without it, each reporting wall
// time and peak RSS; then the reuse split once more on the TypeScript trie (KVROUTE_NATIVE=0,
// the reference). Targets (the addon's legs): ≤ 20 s, ≤ 2 GiB.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { workloadMain } from './lib/cli.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', 'dist', 'cli.js');
const generator = join(here, 'lib', 'records-gen.mjs');
const child = join(here, 'lib', 'analyze-run-child.mjs');

/**
 * @typedef {{
 *   workload: 'analyze-run', kind: 'run-analysis', reuse: boolean, workers: number, records: number,
 *   file_bytes: number, n_slow: number, seconds: number, peak_rss_bytes: number,
 *   trie?: 'native' | 'typescript',
 * }} RunAnalysisResult
 */

/** @param {string[]} args @param {NodeJS.ProcessEnv} [env] */
function run(args, env = process.env) {
  const result = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 26, env });
  if (result.status !== 0) throw new Error(`${args.join(' ')} failed (${result.status}): ${result.stderr}`);
  return result.stdout;
}

workloadMain('analyze-run', ({ quick }) => {
  const scale = quick ? 85 : 850; // ~1,240 requests per unit: 850 gives ~1.05M
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-bench-records-'));
  try {
    const trace = join(dir, 'synth.jsonl');
    const records = join(dir, 'synth.records');
    const started = performance.now();
    run([cli, 'trace', 'synth', '--scale', String(scale), '--block-size', '512', '-o', trace]);
    run([generator, trace, records]);
    const bytes = statSync(records).size;
    console.log(
      `  generated the trace and ${(bytes / 2 ** 20).toFixed(0)} MiB of records in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
    /** @type {RunAnalysisResult[]} */
    const results = [];
    for (const [reuse, workers, trie] of /** @type {const} */ ([
      [false, 0, 'native'],
      [true, 1, 'native'],
      [true, 0, 'native'],
      [true, 1, 'typescript'],
    ])) {
      const env = trie === 'native' ? process.env : { ...process.env, KVROUTE_NATIVE: '0' };
      const mode = reuse ? 'reuse' : 'no-reuse';
      const figures = JSON.parse(run(['--expose-gc', child, records, mode, String(workers)], env));
      console.log(
        `  analyze run${reuse ? `, reuse split (${trie} trie) on ${workers === 0 ? 'this thread' : `${workers} worker`}` : ', records only'}: ` +
          `${figures.records.toLocaleString('en-US')} records (${figures.n_slow.toLocaleString('en-US')} slow) in ` +
          `${figures.seconds.toFixed(1)} s, peak RSS ${(figures.peak_rss_bytes / 2 ** 20).toFixed(0)} MiB`,
      );
      results.push({
        workload: 'analyze-run',
        kind: 'run-analysis',
        reuse,
        workers,
        trie,
        file_bytes: bytes,
        ...figures,
      });
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
