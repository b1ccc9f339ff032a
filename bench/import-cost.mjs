// @ts-check
// Workload (issue #29): what `import { Router } from 'kvroute'` costs an embedder, each run a
// fresh process importing the package by its name (package self-reference from its root).
// - floor: `node` importing nothing, Node's own start-up and memory on this machine;
// - `import { Router }`: the import alone (ms from before the import() to after, RSS after);
// - `+ new Router().route()`: the import, a two-instance router (the addon loaded) and one route.
// Each leg runs RUNS times (5 with --quick) after one untimed run, the legs interleaved in an
// order rotated every round so drift on the shared machine hits each alike. Reported per leg: the
// median import ms, the median RSS in MiB after it, and the median process wall ms.
// KVROUTE_BENCH_IMPORT_BASELINE=DIR times another checkout of the package beside this one (e.g.
// main before the subpath exports; built, with its node_modules), named by
// KVROUTE_BENCH_IMPORT_BASELINE_LABEL (default "baseline").
import { spawnSync } from 'node:child_process';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';

import { workloadMain } from './lib/cli.mjs';

/**
 * @typedef {{
 *   workload: 'import-cost', kind: 'import-cost', build: string, leg: string, runs: number,
 *   import_ms: number, rss_mib: number, wall_ms: number, machine: string,
 * }} ImportCostResult
 */

const RUNS = 20;
const QUICK_RUNS = 5;
const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The child's script: prints { importMs, rss } as JSON. */
const IMPORT_ONLY = `
const t0 = performance.now();
const { Router } = await import('kvroute');
const importMs = performance.now() - t0;
if (typeof Router !== 'function') throw new Error('no Router');
console.log(JSON.stringify({ importMs, rss: process.memoryUsage().rss }));`;
const IMPORT_AND_ROUTE = `
const t0 = performance.now();
const { Router } = await import('kvroute');
const router = new Router({ instances: 2 });
router.complete(router.route({ prompt: 'hello', session: 's' }));
const importMs = performance.now() - t0;
console.log(JSON.stringify({ importMs, rss: process.memoryUsage().rss }));`;
const FLOOR = `console.log(JSON.stringify({ importMs: 0, rss: process.memoryUsage().rss }));`;

/** @typedef {{ build: string, leg: string, cwd: string, script: string }} Leg */

/** @param {string} build @param {string} cwd @returns {Leg[]} */
function packageLegs(build, cwd) {
  return [
    { build, leg: "import { Router } from 'kvroute'", cwd, script: IMPORT_ONLY },
    { build, leg: '+ new Router().route()', cwd, script: IMPORT_AND_ROUTE },
  ];
}

workloadMain('import-cost', ({ quick }) => {
  const baseline = process.env.KVROUTE_BENCH_IMPORT_BASELINE;
  /** @type {Leg[]} */
  const legs = [
    { build: 'node', leg: 'node, nothing imported', cwd: ROOT, script: FLOOR },
    ...packageLegs('this', ROOT),
    ...(baseline ? packageLegs(process.env.KVROUTE_BENCH_IMPORT_BASELINE_LABEL ?? 'baseline', baseline) : []),
  ];
  const runs = quick ? QUICK_RUNS : RUNS;
  // RESULTS.md names one machine, the routing figures'; this workload's may be another.
  const machine = `${cpus()[0]?.model.trim() ?? 'unknown CPU'}, ${cpus().length} cores, Node ${process.version}`;
  /** @type {Array<Array<{ importMs: number, rss: number, wallMs: number }>>} */
  const samples = legs.map(() => []);
  for (const leg of legs) run(leg); // untimed: page cache and disk warm for every leg
  for (let round = 0; round < runs; round++)
    for (let k = 0; k < legs.length; k++) {
      const i = (k + round) % legs.length;
      samples[i]?.push(run(/** @type {Leg} */ (legs[i])));
    }
  /** @type {ImportCostResult[]} */
  const results = legs.map((leg, i) => {
    const s = /** @type {Array<{ importMs: number, rss: number, wallMs: number }>} */ (samples[i]);
    return {
      workload: 'import-cost',
      kind: 'import-cost',
      build: leg.build,
      leg: leg.leg,
      runs,
      import_ms: round1(median(s.map((x) => x.importMs))),
      rss_mib: round1(median(s.map((x) => x.rss / 2 ** 20))),
      wall_ms: round1(median(s.map((x) => x.wallMs))),
      machine,
    };
  });
  for (const r of results)
    console.log(
      `  ${r.build.padEnd(10)} ${r.leg.padEnd(34)} import ${r.import_ms.toFixed(1).padStart(6)} ms` +
        `  rss ${r.rss_mib.toFixed(1).padStart(6)} MiB  wall ${r.wall_ms.toFixed(1).padStart(6)} ms  (${r.runs} runs)`,
    );
  return results;
});

/** One fresh process; a failing run stops the workload. @param {Leg} leg */
function run(leg) {
  const started = performance.now();
  const child = spawnSync(process.execPath, ['--input-type=module', '-e', leg.script], {
    cwd: leg.cwd,
    encoding: 'utf8',
    timeout: 30_000,
  });
  const wallMs = performance.now() - started;
  if (child.status !== 0)
    throw new Error(`${leg.build} ${leg.leg} exited ${child.status ?? child.signal}: ${child.stderr}`);
  const { importMs, rss } = /** @type {{ importMs: number, rss: number }} */ (JSON.parse(child.stdout.trim()));
  return { importMs, rss, wallMs };
}

/** @param {number[]} xs */
function median(xs) {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? NaN;
}

/** @param {number} x */
function round1(x) {
  return Math.round(x * 10) / 10;
}
