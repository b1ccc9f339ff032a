#!/usr/bin/env node
// @ts-check
/**
 * The replica grid of docs/scale-out.md: `kvroute sim run` over R = 1, 2, 4, 8 router replicas
 * (random and session assignment), for min_ttft and unified+A+B, shadow and shm engine state, on
 * the default trace (8 instances) and the 8×-scaled one (64 instances), each with three kinds of
 * sync between the replicas (`sync`): `own`, none (each replica's cache belief from its own
 * dispatches); `events`, cache state fed from the engines' KV events, idealised (no delay); `all`,
 * `--sync all --sync-delay 5`: KV events and each replica's load and session placements shared,
 * 5 ms late (at R = 1 there is nothing to share: the cell runs as `own`).
 *
 *   node scripts/replica-grid.mjs [--jobs 2] [--syncs own,events,all] [--out FILE]
 *   node scripts/replica-grid.mjs --tables-only [--out FILE]   # the markdown tables of FILE
 *
 * Needs `npm run build` (runs dist/cli.js). Each cell is one child process; --jobs run at once.
 * The JSON file (default docs/scale-out/replica-grid.json) keeps every cell; a run over some
 * syncs replaces those cells and keeps the others. It is written whole or not at all
 * (a temporary file renamed over it), and only after every cell ran. Runs are deterministic:
 * the same cells give the same numbers on any machine; only `seconds` differs.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli.js');

const TRACES = [
  { name: 'default', instances: 8, synth: ['--seed', '1'] },
  { name: 'scaled', instances: 64, synth: ['--seed', '1', '--scale', '8'] },
];
const ENGINE_STATES = ['shadow', 'shm'];
const POLICIES = ['min_ttft', 'unified+A+B'];
const SPLITS = [
  { replicas: 1, assign: null },
  ...['random', 'session'].flatMap((assign) => [2, 4, 8].map((replicas) => ({ replicas, assign }))),
];
const SYNCS = ['own', 'events', 'all'];

/**
 * @typedef {{ trace: string, instances: number, engine_state: string, policy: string,
 *   replicas: number, assign: string | null, sync: string }} Cell
 * @typedef {Cell & { apc: number, ttft_p90_s: number, instances_per_session: number,
 *   preempted_requests: number, requests: number, seconds: number }} CellResult
 */

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '2' },
    syncs: { type: 'string', default: SYNCS.join(',') },
    out: { type: 'string', default: join(root, 'docs', 'scale-out', 'replica-grid.json') },
    'tables-only': { type: 'boolean', default: false },
  },
});

/** @param {string} message @returns {never} */
function fail(message) {
  process.stderr.write(`replica-grid: ${message}\n`);
  process.exit(2);
}

const cellKey = (/** @type {Cell} */ c) =>
  [c.trace, c.engine_state, c.policy, c.replicas, c.assign ?? '-', c.sync].join(' ');

if (values['tables-only']) {
  if (!existsSync(values.out)) fail(`--out ${values.out}: no such file (run the grid first)`);
  process.stdout.write(renderTables(JSON.parse(readFileSync(values.out, 'utf8')).cells));
  process.exit(0);
}

const jobs = Number(values.jobs);
if (!Number.isInteger(jobs) || jobs < 1 || jobs > 64)
  fail(`--jobs must be an integer from 1 to 64, got ${values.jobs}`);
const syncs = values.syncs.split(',');
for (const sync of syncs) if (!SYNCS.includes(sync)) fail(`--syncs must list ${SYNCS.join(', ')}, got ${sync}`);
if (!existsSync(cli)) fail(`${cli} is missing: run npm run build first`);

const work = mkdtempSync(join(tmpdir(), 'kvroute-replica-grid-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
for (const trace of TRACES) {
  const made = spawnSync(
    process.execPath,
    [cli, 'trace', 'synth', ...trace.synth, '-o', join(work, `${trace.name}.jsonl`)],
    {
      encoding: 'utf8',
    },
  );
  if (made.status !== 0) fail(`trace synth ${trace.synth.join(' ')} failed:\n${made.stderr}`);
}

/** @type {Cell[]} */
const cells = [];
for (const sync of syncs)
  for (const trace of TRACES)
    for (const engine_state of ENGINE_STATES)
      for (const policy of POLICIES)
        for (const { replicas, assign } of SPLITS)
          cells.push({
            trace: trace.name,
            instances: trace.instances,
            engine_state,
            policy,
            replicas,
            assign,
            sync,
          });

const started = Date.now();
let done = 0;
/** @type {CellResult[]} */
const results = new Array(cells.length);
await Promise.all(
  Array.from({ length: Math.min(jobs, cells.length) }, async (_, worker) => {
    for (let i = worker; i < cells.length; i += jobs) {
      const cell = /** @type {Cell} */ (cells[i]);
      const result = await runCell(cell);
      results[i] = result;
      done += 1;
      process.stderr.write(`[${done}/${cells.length}] ${cellKey(cell)}: ${result.seconds.toFixed(1)} s\n`);
    }
  }),
);

/** @type {CellResult[]} */
const previous = existsSync(values.out) ? JSON.parse(readFileSync(values.out, 'utf8')).cells : [];
const replaced = new Set(results.map(cellKey));
const merged = [...previous.filter((c) => !replaced.has(cellKey(c))), ...results].sort((a, b) => order(a) - order(b));
const file = {
  command: 'node scripts/replica-grid.mjs',
  written_at: new Date().toISOString(),
  machine: { cpus: cpus().length, node: process.version },
  cells: merged,
};
const temporary = `${values.out}.${process.pid}.tmp`;
writeFileSync(temporary, `${JSON.stringify(file, null, 2)}\n`);
renameSync(temporary, values.out);
process.stderr.write(
  `replica-grid: ${results.length} cells in ${((Date.now() - started) / 60_000).toFixed(1)} min with --jobs ${jobs}; wrote ${values.out}\n`,
);

/** A stable order: sync, trace, engine state, policy, then the SPLITS order. @param {Cell} c */
function order(c) {
  const split = SPLITS.findIndex((s) => s.replicas === c.replicas && s.assign === c.assign);
  return (
    (((SYNCS.indexOf(c.sync) * 2 + TRACES.findIndex((t) => t.name === c.trace)) * 2 +
      ENGINE_STATES.indexOf(c.engine_state)) *
      2 +
      POLICIES.indexOf(c.policy)) *
      SPLITS.length +
    split
  );
}

/**
 * @param {Cell} cell
 * @returns {Promise<CellResult>}
 */
function runCell(cell) {
  const args = [
    cli,
    'sim',
    'run',
    '--trace',
    join(work, `${cell.trace}.jsonl`),
    '--instances',
    String(cell.instances),
    '--policy',
    cell.policy,
    '--engine-state',
    cell.engine_state,
    '--replicas',
    String(cell.replicas),
    ...(cell.assign === null ? [] : ['--replica-assign', cell.assign]),
    ...syncArgs(cell),
    '--json',
  ];
  const began = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`${cellKey(cell)}: exit ${code}\n${stderr}`));
      const m = JSON.parse(stdout);
      resolve({
        ...cell,
        apc: m.apc,
        ttft_p90_s: m.ttft_s.p90,
        instances_per_session: m.instances_per_session,
        preempted_requests: m.preempted_requests,
        requests: m.requests,
        seconds: (Date.now() - began) / 1000,
      });
    });
  });
}

/** The sim run flags of a cell's sync. @param {Cell} cell */
function syncArgs(cell) {
  if (cell.sync === 'events') return ['--cache-state', 'events'];
  if (cell.sync === 'all' && cell.replicas > 1) return ['--sync', 'all', '--sync-delay', '5'];
  return [];
}

/**
 * One markdown table per engine state, trace and policy: own, events and all side by side.
 * @param {CellResult[]} all
 */
function renderTables(all) {
  const find = (/** @type {Cell} */ c) => all.find((x) => cellKey(x) === cellKey(c));
  /** @typedef {CellResult | undefined} Found */
  const pct = (/** @type {Found} */ x) => (x === undefined ? '–' : `${(x.apc * 100).toFixed(1)}%`);
  const sec = (/** @type {Found} */ x) => (x === undefined ? '–' : `${x.ttft_p90_s.toFixed(2)} s`);
  const per = (/** @type {Found} */ x) => (x === undefined ? '–' : x.instances_per_session.toFixed(2));
  const out = [];
  for (const engine_state of ENGINE_STATES) {
    out.push(`#### Engine state \`${engine_state}\`\n`);
    for (const trace of TRACES)
      for (const policy of POLICIES) {
        out.push(`\`${policy}\`, ${trace.name} trace, ${trace.instances} instances:\n`);
        const header = [
          'R',
          'assign',
          ...SYNCS.map((sync) => `APC ${sync}`),
          ...SYNCS.map((sync) => `TTFT p90 ${sync}`),
          ...SYNCS.map((sync) => `inst./session ${sync}`),
        ];
        const rows = SPLITS.map(({ replicas, assign }) => {
          const base = { trace: trace.name, instances: trace.instances, engine_state, policy, replicas, assign };
          const found = SYNCS.map((sync) => find({ ...base, sync }));
          return [
            replicas === 1 ? '1 (no split)' : String(replicas),
            assign ?? '–',
            ...found.map(pct),
            ...found.map(sec),
            ...found.map(per),
          ];
        });
        out.push(markdownTable(header, rows, [true, false, ...header.slice(2).map(() => true)]), '');
      }
  }
  return `${out.join('\n')}\n`;
}

/**
 * @param {string[]} header
 * @param {string[][]} rows
 * @param {boolean[]} rightAligned
 */
function markdownTable(header, rows, rightAligned) {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => String(r[i]).length)));
  const line = (/** @type {string[]} */ cells) =>
    `| ${cells.map((c, i) => (rightAligned[i] ? c.padStart(widths[i] ?? 0) : c.padEnd(widths[i] ?? 0))).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (rightAligned[i] ? `${'-'.repeat(w - 1)}:` : '-'.repeat(w))).join(' | ')} |`;
  return [line(header), rule, ...rows.map(line)].join('\n');
}
