#!/usr/bin/env node
// @ts-check
// The policy evaluation of docs/policy-evaluation.md (issues #16, #28): every policy, through
// `kvroute sweep` in the simulator, in each regime of a set, on generated traces of the given
// seeds, then one table checking issue #28's targets per regime. Resumable: a sweep whose
// sweep.json exists is not run again.
//
//   node scripts/policy-eval.mjs --out DIR [--seeds 11,12,13] [--set regimes|perturbations|generalization] [--fleet SPEC]
//
// The sets, their regimes and the policy variants are in scripts/policy-eval/sets.mjs; the
// targets in scripts/policy-eval/targets.mjs. Seeds 11-13 are held out; 1-3 are for tuning.
//
// --fleet SPEC runs every regime on a mixed fleet (`kvroute sweep --fleet`,
// docs/engine-model.md#mixed-fleets) in place of its instance count; a regime that sets its own
// instances or fleet is skipped, with a note. Its sweeps and table carry the fleet in their names.
//
// Variants (sets.mjs VARIANTS, e.g. `min_ttft (fixed costs)`): each runs as a sweep of its own
// (`--policies <policy> <flags>`) per regime and seed, and becomes a row named after it. One
// whose flag `kvroute sweep --help` does not list is skipped, with a note.
//
// Writes DIR/traces/, DIR/sweeps/<regime>-s<seed>[-fleet-<spec>][-v-<variant>]/ (each a `kvroute
// sweep` directory), DIR/<set>-seeds-<seeds>[-fleet-<spec>].json (every cell's TTFT p90, APC and
// hotspot index by regime, policy and seed; each regime's setup per seed; the targets) and the
// same name .md (the targets table), and prints the table as Markdown.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { DEFAULT_POLICY, POLICY_NAMES } from '../dist/core/policy-spec.js';
import {
  availableVariants,
  EXISTING_POLICIES,
  ownsInstances,
  regimeFleet,
  SET_LABELS,
  SETS,
} from './policy-eval/sets.mjs';
import { targetsMarkdown } from '../dist/report/evaluation-targets.js';
import { checkTargets, targetRecord } from './policy-eval/targets.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli.js');
// Every policy kvroute has, the default last.
const POLICIES = POLICY_NAMES;
const USAGE =
  'usage: policy-eval.mjs --out DIR [--seeds 11,12,13] [--set regimes|perturbations|generalization] [--fleet SPEC]';

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    seeds: { type: 'string', default: '11,12,13' },
    set: { type: 'string', default: 'regimes' },
    fleet: { type: 'string' },
  },
});
if (values.out === undefined) throw new Error(USAGE);
const set = SETS[values.set];
if (set === undefined) throw new Error(`--set must be one of ${Object.keys(SETS).join(', ')}`);
const out = values.out;
const seeds = values.seeds.split(',').map(Number);
if (seeds.some((s) => !Number.isSafeInteger(s) || s < 0))
  throw new Error(`--seeds: integers >= 0, got ${values.seeds}`);

/** @param {string[]} args */
function kvroute(args) {
  const result = spawnSync(process.execPath, [cli, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (result.status !== 0) throw new Error(`kvroute ${args.join(' ')} exited ${result.status}`);
  return result.stdout;
}

const slug = (/** @type {string} */ name) => name.replace(/[^A-Za-z0-9.]+/g, '-').replace(/-+$/, '');
const fleet = values.fleet;
const fleetSuffix = fleet === undefined ? '' : `-fleet-${slug(fleet)}`;
/** With --fleet, the regimes that fix their own instances are left out. */
const regimes = set.filter((regime) => {
  if (fleet === undefined || !ownsInstances(regime)) return true;
  process.stderr.write(`${regime.name}: skipped: it sets its own instances, which --fleet ${fleet} replaces\n`);
  return false;
});
const { runs: variants, skipped } = availableVariants(kvroute(['sweep', '--help']));
for (const { variant, missing } of skipped)
  process.stderr.write(`${variant.name}: skipped: this kvroute's sweep has no ${missing.join(', ')}\n`);
const existing = [...EXISTING_POLICIES, ...variants.filter((v) => v.existing).map((v) => v.name)];

/**
 * The regime's trace for `seed` (made when missing), and how it was made: the file, or the
 * command line that writes it.
 * @param {import('./policy-eval/sets.mjs').Regime} regime
 * @param {number} seed
 */
function traceFor(regime, seed) {
  if (regime.file !== undefined) return { trace: regime.file, made: relative(root, regime.file) };
  const synth = ['trace', 'synth', '--seed', String(seed), ...(regime.synth ?? [])];
  const base = join(out, 'traces', `synth-s${seed}${(regime.synth ?? []).join('')}.jsonl`);
  if (!existsSync(base)) kvroute([...synth, '-o', base]);
  if (regime.transform === undefined) return { trace: base, made: `kvroute ${synth.join(' ')}` };
  const trace = base.replace(/\.jsonl$/, `.transform${regime.transform.join('')}.jsonl`);
  if (!existsSync(trace)) kvroute(['trace', 'transform', base, ...regime.transform, '-o', trace]);
  return { trace, made: `kvroute ${synth.join(' ')} | kvroute trace transform - ${regime.transform.join(' ')}` };
}

/**
 * Runs one sweep into `dir` unless it is done; appends its cells to `byPolicy`, under `rename`
 * when given (a variant's row).
 * @param {string} dir
 * @param {string[]} args
 * @param {number} seed
 * @param {Record<string, { seed: number, ttft_p90: number, apc: number, hotspot: number }[]>} byPolicy
 * @param {string} [rename]
 */
function sweepInto(dir, args, seed, byPolicy, rename) {
  if (!existsSync(join(dir, 'sweep.json')))
    kvroute(['sweep', ...args, '--engine-state', 'shadow', '--force', '--out', dir]);
  const manifest = JSON.parse(readFileSync(join(dir, 'sweep.json'), 'utf8'));
  for (const cell of manifest.cells) {
    const summary = JSON.parse(readFileSync(join(dir, cell.summary), 'utf8'));
    (byPolicy[rename ?? cell.policy] ??= []).push({
      seed,
      ttft_p90: summary.ttft_s.p90,
      apc: summary.apc,
      hotspot: summary.hotspot_index,
    });
  }
}

mkdirSync(join(out, 'traces'), { recursive: true });
mkdirSync(join(out, 'sweeps'), { recursive: true });
/** @type {Record<string, Record<string, { seed: number, ttft_p90: number, apc: number, hotspot: number }[]>>} */
const cells = {};
/** @type {Record<string, Record<string, { trace: string, sweep: string[] }>>} */
const setups = {};
for (const regime of regimes) {
  /** @type {Record<string, { seed: number, ttft_p90: number, apc: number, hotspot: number }[]>} */
  const byPolicy = (cells[regime.name] = {});
  /** @type {Record<string, { trace: string, sweep: string[] }>} */
  const setup = (setups[regime.name] = {});
  // A fixed file has no seed: it runs once.
  for (const seed of regime.file === undefined ? seeds : [0]) {
    const { trace, made } = traceFor(regime, seed);
    const ownFleet = regimeFleet(regime, seed) ?? fleet;
    const flags = [...regime.sweep, ...(ownFleet === undefined ? [] : ['--fleet', ownFleet])];
    setup[String(seed)] = { trace: made, sweep: flags };
    const dir = join(out, 'sweeps', `${slug(regime.name)}-s${seed}${fleetSuffix}`);
    process.stderr.write(`${regime.name}, seed ${seed}\n`);
    sweepInto(dir, ['--trace', trace, '--policies', POLICIES.join(','), ...flags], seed, byPolicy);
    for (const variant of variants) {
      const args = ['--trace', trace, '--policies', variant.policy, ...flags, ...variant.sweep];
      sweepInto(`${dir}-v-${slug(variant.name)}`, args, seed, byPolicy, variant.name);
    }
  }
}

const defaultPolicy = DEFAULT_POLICY;
const rows = regimes.map((regime) =>
  checkTargets(regime.name, cells[regime.name] ?? {}, {
    defaultPolicy,
    existing,
    beatsExisting: regime.beatsExisting === true,
  }),
);
const records = new Map(rows.map((r) => [r.regime, targetRecord(r)]));
const name = `${values.set}-seeds-${seeds.join('-')}${fleetSuffix}`;
const evaluation = {
  seeds,
  policies: [...POLICIES, ...variants.map((v) => v.name)],
  ...(fleet === undefined ? {} : { fleet }),
  variants: variants.map(({ name: n, policy, sweep }) => ({ name: n, policy, sweep })),
  cells,
  setups,
  targets: Object.fromEntries(records),
};
writeFileSync(join(out, `${name}.json`), JSON.stringify(evaluation, null, 2) + '\n');
const table = targetsMarkdown(records, SET_LABELS[values.set] ?? 'regime');
writeFileSync(join(out, `${name}.md`), table.join('\n') + '\n');
console.log(table.join('\n'));
