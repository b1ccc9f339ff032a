// @ts-check
// Workload (issue #15): `kvroute sweep`, the default sweep (lmetric, load_only, sticky, unified,
// unified+A+B × shadow, shm: 10 simulator cells on Piscina workers, one per core) on the
// default synthetic trace (`kvroute trace synth`, ~1,250 requests), 8 instances per cell, as
// the CLI runs it in a fresh process: wall time from start to sweep.json, trace
// characterization and the B2 interference grid included. Target: <= 30 s wall.
import { spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { workloadMain } from './lib/cli.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const cli = join(here, '..', 'dist', 'cli.js');

/**
 * @typedef {{
 *   workload: 'sweep', kind: 'sweep', cells: number, requests: number, workers: number,
 *   seconds: number,
 * }} SweepResult
 */

/** @param {string[]} args */
function kvroute(args) {
  const result = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (result.status !== 0) throw new Error(`kvroute ${args.join(' ')} failed (${result.status}): ${result.stderr}`);
  return result.stdout;
}

workloadMain('sweep', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'kvroute-bench-sweep-'));
  try {
    const trace = join(scratch, 'synth.jsonl');
    kvroute(['trace', 'synth', '-o', trace]);
    const out = join(scratch, 'out');
    const started = performance.now();
    kvroute(['sweep', '--trace', trace, '--out', out]);
    const seconds = (performance.now() - started) / 1000;
    /** @type {{ cells: unknown[], trace: { fingerprint: string } }} */
    const manifest = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8'));
    const requests = Number(manifest.trace.fingerprint.split(':').pop());
    const workers = availableParallelism();
    console.log(
      `  default sweep: ${manifest.cells.length} cells × ${requests.toLocaleString('en-US')} requests on ${workers} workers: ${seconds.toFixed(2)} s wall`,
    );
    /** @type {SweepResult[]} */
    const results = [{ workload: 'sweep', kind: 'sweep', cells: manifest.cells.length, requests, workers, seconds }];
    return results;
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
});
