// @ts-check
// Workload (issue #15): `kvroute analyze run` on 1M records. `kvroute trace synth` writes a
// ~1M-request trace (512-token blocks, as the characterize workload), and a generator turns
// each request into a record with a plausible timeline (8 instances by session, TTFT growing
// with the uncached tokens, so some requests are slow for each cause) under a header carrying
// the trace's fingerprint. A fresh process then runs what `analyze run --json` runs, with the
// reuse split (the trace walk) and without it, each reporting wall time and peak RSS.
// Targets: ≤ 20 s, ≤ 2 GiB.
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
 * }} RunAnalysisResult
 */

/** @param {string[]} args */
function run(args) {
  const result = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 1 << 26 });
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
    for (const [reuse, workers] of /** @type {const} */ ([
      [false, 0],
      [true, 1],
      [true, 0],
    ])) {
      const figures = JSON.parse(run(['--expose-gc', child, records, reuse ? 'reuse' : 'no-reuse', String(workers)]));
      console.log(
        `  analyze run${reuse ? `, reuse split on ${workers === 0 ? 'this thread' : `${workers} worker`}` : ', records only'}: ` +
          `${figures.records.toLocaleString('en-US')} records (${figures.n_slow.toLocaleString('en-US')} slow) in ` +
          `${figures.seconds.toFixed(1)} s, peak RSS ${(figures.peak_rss_bytes / 2 ** 20).toFixed(0)} MiB`,
      );
      results.push({ workload: 'analyze-run', kind: 'run-analysis', reuse, workers, file_bytes: bytes, ...figures });
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
