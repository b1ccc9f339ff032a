// @ts-check
// npm run bench [-- --quick] [--json FILE] [--only mooncake,agentic-long,kv-events] [--update-results]
// npm run bench -- --from FILE [--update-results]    (report a saved --json run again)
//
// Runs every workload file of bench/ in a fresh process (node --expose-gc):
// the routing workloads with the native addon and the TypeScript reference side
// by side, and the trace characterization workload; then prints their figures,
// the native/reference ratios and the targets of issues #2 and #3.
// --json writes { machine, quick, timer_overhead_us, results: [...] }; every result carries the
// date it was measured.
// --update-results rewrites bench/RESULTS.md from this run. With --only it refreshes just those
// workloads: their results replace the same workloads' in bench/results.json, the others keep
// theirs (and their dates), and the merged document is written back to bench/results.json. Only
// the sections and target lines this run measured are rewritten; the rest of RESULTS.md, and
// whatever a refreshed section holds below its `<!-- kept by --update-results … -->` line, stays
// as written (lib/results-merge.mjs).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { machineInfo, printMachine } from './lib/machine.mjs';
import { timerOverheadUs } from './lib/measure.mjs';
import { machineLine, renderResults, targetChecks } from './lib/report.mjs';
import { mergeResults } from './lib/results-merge.mjs';

const WORKLOADS = [
  'mooncake',
  'agentic-long',
  'characterize',
  'simulate',
  'sweep',
  'feed',
  'proxy',
  'proxy-body-size',
  'proxy-bodies',
  'proxy-threads',
  'cli-startup',
  'import-cost',
  'analyze-run',
  'replay-driver',
  'tokenize',
  'kv-events',
  'event-relay',
  'tracing',
  'flow',
  'flow-targets',
];
/** The workloads whose samples are route() + complete() pairs net of the timer's cost. */
const TIMED_PAIRS = ['mooncake', 'agentic-long', 'feed'];
const here = dirname(fileURLToPath(import.meta.url));

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    json: { type: 'string' },
    only: { type: 'string' },
    'update-results': { type: 'boolean' },
    from: { type: 'string' },
  },
});

if (values.from) {
  /** @type {import('./lib/report.mjs').BenchDocument} */
  const saved = JSON.parse(readFileSync(values.from, 'utf8'));
  for (const line of targetChecks(saved.results)) console.log(line);
  if (values['update-results']) {
    writeResultsMd(saved, saved, `npm run bench${saved.quick ? ' -- --quick' : ''}`);
  }
  process.exit(0);
}
const only = values.only?.split(',');
const unknown = only?.filter((w) => !WORKLOADS.includes(w)) ?? [];
if (unknown.length > 0) {
  console.error(`unknown workload(s): ${unknown.join(', ')}; known: ${WORKLOADS.join(', ')}`);
  process.exit(2);
}

const machine = machineInfo();
printMachine(machine);
const timerOverhead = timerOverheadUs();
console.log(
  `timer:   ${(timerOverhead * 1000).toFixed(0)} ns per performance.now() pair (subtracted from every sample)`,
);
console.log(`mode:    ${values.quick ? 'quick' : 'full'}\n`);

const scratch = mkdtempSync(join(tmpdir(), 'kvroute-bench-'));
/** @type {import('./lib/report.mjs').AnyResult[]} */
const results = [];
try {
  for (const workload of WORKLOADS.filter((w) => !only || only.includes(w))) {
    const out = join(scratch, `${workload}.json`);
    // A .ts workload (Node 20 strips no types) runs through tsx's loader.
    const script = existsSync(join(here, `${workload}.ts`))
      ? ['--import', import.meta.resolve('tsx'), join(here, `${workload}.ts`)]
      : [join(here, `${workload}.mjs`)];
    const args = ['--expose-gc', ...script, '--out', out, ...(values.quick ? ['--quick'] : [])];
    console.log(`${workload}:`);
    const child = spawnSync(process.execPath, args, { stdio: 'inherit' });
    if (child.status !== 0) {
      console.error(`${workload} failed (exit ${child.status ?? child.signal})`);
      process.exit(1);
    }
    /** @type {import('./lib/report.mjs').AnyResult[]} */
    const produced = JSON.parse(readFileSync(out, 'utf8'));
    results.push(...produced.map((r) => ({ ...r, date: machine.date })));
  }
} finally {
  rmSync(scratch, { recursive: true, force: true });
}

console.log('');
for (const line of targetChecks(results)) console.log(line);

const document = { machine, quick: values.quick === true, timer_overhead_us: timerOverhead, results };
if (values.json) {
  writeFileSync(values.json, `${JSON.stringify(document, null, 2)}\n`);
  console.log(`\nwrote ${values.json}`);
}
if (values['update-results']) {
  const recorded = only ? mergeIntoSaved(document, only) : document;
  if (only) {
    writeFileSync(join(here, 'results.json'), `${JSON.stringify(recorded, null, 2)}\n`);
    console.log('wrote bench/results.json (merged)');
  }
  writeResultsMd(recorded, document, `npm run bench${values.quick ? ' -- --quick' : ''}`);
}

/**
 * Rewrites bench/RESULTS.md: `recorded` rendered, merged with the file on disk so that only what
 * `measured` (this run's own results) renders is refreshed and text written by hand stays
 * (lib/results-merge.mjs). Written to a temporary file, then renamed over it: never half-written.
 * @param {import('./lib/report.mjs').BenchDocument} recorded
 * @param {import('./lib/report.mjs').BenchDocument} measured
 * @param {string} command
 */
function writeResultsMd(recorded, measured, command) {
  const path = join(here, 'RESULTS.md');
  const onDisk = existsSync(path) ? readFileSync(path, 'utf8') : '';
  const text = mergeResults(renderResults(recorded, command), onDisk, renderResults(measured, command));
  writeFileSync(`${path}.tmp`, text);
  renameSync(`${path}.tmp`, path);
  console.log('wrote bench/RESULTS.md');
}

/**
 * The saved bench/results.json with `workloads` replaced by this run's results. Saved results
 * without a date take their document's.
 * @param {import('./lib/report.mjs').BenchDocument} run
 * @param {string[]} workloads
 * @returns {import('./lib/report.mjs').BenchDocument}
 */
function mergeIntoSaved(run, workloads) {
  /** @type {import('./lib/report.mjs').BenchDocument} */
  const saved = JSON.parse(readFileSync(join(here, 'results.json'), 'utf8'));
  // Each result keeps its date and machine: this run's machine may not be the saved run's.
  const kept = saved.results
    .filter((r) => !workloads.includes(r.workload))
    .map((r) => ({
      ...r,
      date: r.date ?? saved.machine.date,
      measured_on: r.measured_on ?? machineLine(saved.machine),
    }));
  const measured = run.results.map((r) => ({ ...r, measured_on: machineLine(run.machine) }));
  // RESULTS.md names one timer overhead and its run's date: those of the routing figures (the
  // workloads that time route() pairs), so a refresh of other workloads keeps the saved ones.
  const timed = workloads.some((w) => TIMED_PAIRS.includes(w));
  const timer = timed
    ? { machine: run.machine, timer_overhead_us: run.timer_overhead_us }
    : { machine: saved.machine, timer_overhead_us: saved.timer_overhead_us };
  return { ...run, ...timer, quick: run.quick || saved.quick, results: [...kept, ...measured] };
}
