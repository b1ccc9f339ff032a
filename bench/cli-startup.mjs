// @ts-check
// Workload (issue #14): how long the `kvroute` command takes to start, each run a fresh process.
// - floor: `node -e 0`, Node's own start-up on this machine, which no CLI can go below;
// - `kvroute --help`: the command line alone (commander and the verb table, no verb loaded);
// - `kvroute hash`: a light verb end to end (`hi` on stdin), which must not load the proxy,
//   the simulator or Piscina.
// Each command runs RUNS times (5 with --quick) after one untimed run, the commands interleaved
// in an order rotated every round so drift on the shared machine hits each alike. Reported per
// command: the median and p90 of spawnSync's wall time, and the median over the floor's.
// KVROUTE_BENCH_CLI_BASELINE=OTHER/dist/cli.js times another build beside this one (e.g. main
// before a CLI change; its node_modules must resolve from there), named by
// KVROUTE_BENCH_CLI_BASELINE_LABEL (default "baseline").
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { workloadMain } from './lib/cli.mjs';

/**
 * @typedef {{
 *   workload: 'cli-startup', kind: 'cli-startup', build: string, command: string,
 *   runs: number, median_ms: number, p90_ms: number, floor_ratio: number,
 * }} CliStartupResult
 */

const RUNS = 21;
const QUICK_RUNS = 5;
const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));

/** @typedef {{ build: string, command: string, args: string[], input?: string }} Leg */

/** @param {string} build @param {string} cli @returns {Leg[]} */
function cliLegs(build, cli) {
  return [
    { build, command: 'kvroute --help', args: [cli, '--help'] },
    { build, command: 'kvroute hash', args: [cli, 'hash'], input: 'hi\n' },
  ];
}

workloadMain('cli-startup', ({ quick }) => {
  const baseline = process.env.KVROUTE_BENCH_CLI_BASELINE;
  /** @type {Leg[]} */
  const legs = [
    { build: 'node', command: 'node -e 0', args: ['-e', '0'] },
    ...cliLegs('this', CLI),
    ...(baseline ? cliLegs(process.env.KVROUTE_BENCH_CLI_BASELINE_LABEL ?? 'baseline', baseline) : []),
  ];
  const runs = quick ? QUICK_RUNS : RUNS;
  /** @type {number[][]} */
  const samples = legs.map(() => []);
  for (const leg of legs) time(leg); // untimed: page cache and disk warm for every leg
  for (let round = 0; round < runs; round++)
    for (let k = 0; k < legs.length; k++) {
      const i = (k + round) % legs.length;
      samples[i]?.push(time(/** @type {Leg} */ (legs[i])));
    }
  const floor = median(/** @type {number[]} */ (samples[0]));
  /** @type {CliStartupResult[]} */
  const results = legs.map((leg, i) => {
    const ms = /** @type {number[]} */ (samples[i]);
    const m = median(ms);
    return {
      workload: 'cli-startup',
      kind: 'cli-startup',
      build: leg.build,
      command: leg.command,
      runs,
      median_ms: round1(m),
      p90_ms: round1(quantile(ms, 0.9)),
      floor_ratio: Math.round((m / floor) * 100) / 100,
    };
  });
  for (const r of results)
    console.log(
      `  ${r.build.padEnd(10)} ${r.command.padEnd(16)} median ${r.median_ms.toFixed(1).padStart(6)} ms` +
        `  p90 ${r.p90_ms.toFixed(1).padStart(6)} ms  ${r.floor_ratio.toFixed(2)}x the floor  (${r.runs} runs)`,
    );
  return results;
});

/** Wall ms of one run; a failing run stops the workload (a broken CLI is not fast). @param {Leg} leg */
function time(leg) {
  const started = performance.now();
  const run = spawnSync(process.execPath, leg.args, { input: leg.input ?? '', encoding: 'utf8', timeout: 30_000 });
  const ms = performance.now() - started;
  if (run.status !== 0)
    throw new Error(`${leg.build} ${leg.command} exited ${run.status ?? run.signal}: ${run.stderr}`);
  return ms;
}

/** @param {number[]} xs @param {number} q */
function quantile(xs, q) {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

/** @param {number[]} xs */
function median(xs) {
  return quantile(xs, 0.5);
}

/** @param {number} x */
function round1(x) {
  return Math.round(x * 10) / 10;
}
