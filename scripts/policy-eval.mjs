#!/usr/bin/env node
// @ts-check
// The policy evaluation of docs/policy-evaluation.md (issue #16): every policy, through
// `kvroute sweep` in the simulator, in each regime, on generated traces of the given seeds, then
// one table per question. Resumable: a sweep whose sweep.json exists is not run again.
//
//   node scripts/policy-eval.mjs --out DIR [--seeds 11,12,13] [--set regimes|perturbations] [--fleet SPEC]
//
// --fleet SPEC runs every regime on a mixed fleet (`kvroute sweep --fleet`,
// docs/engine-model.md#mixed-fleets) in place of its instance count; a regime that sets its own
// --instances is skipped, with a note. Its sweeps and table carry the fleet in their names.
//
// Writes DIR/traces/, DIR/sweeps/<regime>-s<seed>[-fleet-<spec>]/ (each a `kvroute sweep` directory) and
// DIR/<set>-seeds-<seeds>[-fleet-<spec>].json (every cell's TTFT p90, APC and hotspot index, by regime, policy and seed) and
// prints the table as Markdown.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { POLICY_NAMES } from '../dist/core/policy-spec.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli.js');
const MOONCAKE = join(root, 'data', 'mooncake_synthetic_trace.jsonl');
const NEW_POLICY = 'min_ttft';
// Every policy kvroute has, the new one last.
const POLICIES = POLICY_NAMES;

/**
 * A regime: how its trace is made (`kvroute trace synth` flags, or a fixed file) and the sweep's
 * own flags.
 * @typedef {{ name: string, synth?: string[], file?: string, sweep: string[] }} Regime
 */
/** @type {Record<string, Regime[]>} */
const SETS = {
  regimes: [
    { name: 'default', synth: [], sweep: [] },
    { name: 'rate 2×', synth: ['--scale', '2'], sweep: [] },
    { name: 'rate 0.5×', synth: ['--scale', '0.5'], sweep: [] },
    { name: 'KV capacity 0.5×', synth: [], sweep: ['--kv-capacity', '0.5'] },
    { name: '16 instances', synth: ['--scale', '2'], sweep: ['--instances', '16'] },
    { name: '64 instances', synth: ['--scale', '8'], sweep: ['--instances', '64'] },
    { name: 'Mooncake trace', file: MOONCAKE, sweep: [] },
  ],
  perturbations: [
    { name: 'as calibrated', synth: [], sweep: [] },
    { name: 'prefill cost 0.7×', synth: [], sweep: ['--prefill-cost', '0.7'] },
    { name: 'prefill cost 1.3×', synth: [], sweep: ['--prefill-cost', '1.3'] },
    { name: 'decode cost 0.7×', synth: [], sweep: ['--decode-cost', '0.7'] },
    { name: 'decode cost 1.3×', synth: [], sweep: ['--decode-cost', '1.3'] },
    { name: 'KV capacity 0.7×', synth: [], sweep: ['--kv-capacity', '0.7'] },
    { name: 'KV capacity 1.3×', synth: [], sweep: ['--kv-capacity', '1.3'] },
  ],
};

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    seeds: { type: 'string', default: '11,12,13' },
    set: { type: 'string', default: 'regimes' },
    fleet: { type: 'string' },
  },
});
if (values.out === undefined)
  throw new Error('usage: policy-eval.mjs --out DIR [--seeds 11,12,13] [--set regimes|perturbations] [--fleet SPEC]');
const set = SETS[values.set];
if (set === undefined) throw new Error(`--set must be one of ${Object.keys(SETS).join(', ')}`);
const out = values.out;
const seeds = values.seeds.split(',').map(Number);

/** @param {string[]} args */
function kvroute(args) {
  const result = spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (result.status !== 0) throw new Error(`kvroute ${args.join(' ')} exited ${result.status}`);
}

const slug = (/** @type {string} */ name) => name.replace(/[^A-Za-z0-9.]+/g, '-').replace(/-+$/, '');
const fleet = values.fleet;
const fleetSuffix = fleet === undefined ? '' : `-fleet-${slug(fleet)}`;
const fleetArgs = fleet === undefined ? [] : ['--fleet', fleet];
/** With --fleet, the regimes that keep their own instance count are left out. */
const regimes = set.filter((regime) => {
  if (fleet === undefined || !regime.sweep.includes('--instances')) return true;
  process.stderr.write(`${regime.name}: skipped: it sets its own --instances, which --fleet ${fleet} replaces\n`);
  return false;
});
mkdirSync(join(out, 'traces'), { recursive: true });
mkdirSync(join(out, 'sweeps'), { recursive: true });
/** @type {Record<string, Record<string, { seed: number, ttft_p90: number, apc: number, hotspot: number }[]>>} */
const cells = {};
for (const regime of regimes) {
  /** @type {Record<string, { seed: number, ttft_p90: number, apc: number, hotspot: number }[]>} */
  const byPolicy = {};
  cells[regime.name] = byPolicy;
  // A fixed file has no seed: it runs once.
  for (const seed of regime.file === undefined ? seeds : [0]) {
    let trace = regime.file;
    if (trace === undefined) {
      const synth = regime.synth ?? [];
      trace = join(out, 'traces', `synth-s${seed}${synth.join('')}.jsonl`);
      if (!existsSync(trace)) kvroute(['trace', 'synth', '--seed', String(seed), ...synth, '-o', trace]);
    }
    const dir = join(out, 'sweeps', `${slug(regime.name)}-s${seed}${fleetSuffix}`);
    if (!existsSync(join(dir, 'sweep.json'))) {
      process.stderr.write(`${regime.name}, seed ${seed}\n`);
      kvroute([
        'sweep',
        '--trace',
        trace,
        '--policies',
        POLICIES.join(','),
        '--engine-state',
        'shadow',
        '--force',
        '--out',
        dir,
        ...regime.sweep,
        ...fleetArgs,
      ]);
    }
    const manifest = JSON.parse(readFileSync(join(dir, 'sweep.json'), 'utf8'));
    for (const cell of manifest.cells) {
      const summary = JSON.parse(readFileSync(join(dir, cell.summary), 'utf8'));
      (byPolicy[cell.policy] ??= []).push({
        seed,
        ttft_p90: summary.ttft_s.p90,
        apc: summary.apc,
        hotspot: summary.hotspot_index,
      });
    }
  }
}
writeFileSync(
  join(out, `${values.set}-seeds-${seeds.join('-')}${fleetSuffix}.json`),
  JSON.stringify({ seeds, policies: POLICIES, ...(fleet === undefined ? {} : { fleet }), cells }, null, 2) + '\n',
);

const mean = (/** @type {number[]} */ xs) => xs.reduce((a, x) => a + x, 0) / xs.length;
const fmt = (/** @type {number} */ x, digits = 2) => x.toFixed(digits);
const lines = [
  `| ${values.set === 'regimes' ? 'regime' : 'engine model'} | best existing (TTFT p90 s) | ${NEW_POLICY} TTFT p90 s | vs best existing | ${NEW_POLICY} rank | APC ${NEW_POLICY} / best | hotspot ${NEW_POLICY} / unified |`,
  '|---|---|---:|---:|---:|---:|---:|',
];
for (const regime of regimes) {
  const rows = Object.entries(cells[regime.name] ?? {}).map(([policy, runs]) => ({
    policy,
    ttft: mean(runs.map((r) => r.ttft_p90)),
    apc: mean(runs.map((r) => r.apc)),
    hotspot: mean(runs.map((r) => r.hotspot)),
  }));
  rows.sort((a, b) => a.ttft - b.ttft);
  const mine = rows.find((r) => r.policy === NEW_POLICY);
  const others = rows.filter((r) => r.policy !== NEW_POLICY);
  const best = others[0];
  const bestApc = Math.max(...rows.map((r) => r.apc));
  const unified = rows.find((r) => r.policy === 'unified');
  if (mine === undefined || best === undefined || unified === undefined)
    throw new Error(`${regime.name}: a policy is missing`);
  lines.push(
    `| ${regime.name} | ${best.policy} ${fmt(best.ttft)} | ${fmt(mine.ttft)} | ${fmt((100 * (mine.ttft - best.ttft)) / best.ttft, 1)}% | ` +
      `${rows.indexOf(mine) + 1} of ${rows.length} | ${fmt(100 * mine.apc, 1)}% / ${fmt(100 * bestApc, 1)}% | ${fmt(mine.hotspot)} / ${fmt(unified.hotspot)} |`,
  );
}
console.log(lines.join('\n'));
