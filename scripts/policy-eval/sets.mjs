// @ts-check
// What scripts/policy-eval.mjs runs: its sets of regimes (how each regime's trace is made and
// which sweep flags it adds), the policy variants run as rows of their own, and the seeded
// misstated-cost fleet. Data and pure functions only: importing this runs nothing.
//
// A regime's trace is `kvroute trace synth --seed S <synth>` (then `trace transform <transform>`
// when it has one), or a fixed file that runs once (seed 0). Its fleet is a `--fleet` spec, or a
// function of the seed (the misstated-cost regime draws one per seed). The default trace shape
// is the evaluation's: `trace synth` defaults on 8 instances (sweep's default).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { mixSeed, SynthRandom } from '../../dist/trace/synth-random.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const MOONCAKE = join(root, 'data', 'mooncake_synthetic_trace.jsonl');

/** Instances of every regime without its own count (`kvroute sweep`'s simulator default). */
export const INSTANCES = 8;

/** The 2- and 3-speed-class fleets of issue #28, item 5. */
export const TWO_CLASS_FLEET = '4,4:prefill=0.5:decode=0.7';
export const THREE_CLASS_FLEET = '3,3:prefill=0.6:decode=0.8,2:prefill=0.35:decode=0.6';

/**
 * A regime.
 * - `synth`: `kvroute trace synth` flags (after `--seed S`); `file`: a fixed trace instead.
 * - `transform`: `kvroute trace transform` flags applied to the synth trace.
 * - `sweep`: the sweep's own flags. `fleet`: a `--fleet` spec, or one per seed.
 * - `beatsExisting`: the issue's ≥ 10% target over the best existing policy applies here.
 * @typedef {{
 *   name: string,
 *   synth?: string[],
 *   transform?: string[],
 *   file?: string,
 *   sweep: string[],
 *   fleet?: string | ((seed: number) => string),
 *   beatsExisting?: boolean,
 * }} Regime
 */

/**
 * Every instance's prefill and decode cost multipliers drawn uniform in [0.5, 1.5] (two decimals)
 * from the seed, as a `--fleet` spec of one group per instance: costs misstated by up to ±50%,
 * which the router is never told. Deterministic per seed; its own stream of the seed, so it
 * does not move with the trace.
 * @param {number} seed
 * @param {number} [instances]
 */
export function misstatedFleet(seed, instances = INSTANCES) {
  const rng = new SynthRandom(mixSeed(seed, 0x6d15, 0));
  const draw = () => (Math.round(rng.uniform(50, 150)) / 100).toFixed(2);
  return Array.from({ length: instances }, () => `1:prefill=${draw()}:decode=${draw()}`).join(',');
}

/** @type {Record<string, Regime[]>} */
export const SETS = {
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
  // Issue #28, item 5: the workloads the first two sets do not cover, on the same trace shape.
  generalization: [
    { name: 'time scale 0.5×', synth: [], transform: ['--time-scale', '0.5'], sweep: [] },
    { name: 'time scale 0.7×', synth: [], transform: ['--time-scale', '0.7'], sweep: [] },
    { name: 'Poisson arrivals', synth: ['--arrivals', 'poisson'], sweep: [] },
    { name: 'on-off arrivals (30 s / 90 s)', synth: ['--arrivals', 'on-off'], sweep: [] },
    { name: '2-class fleet', synth: [], sweep: [], fleet: TWO_CLASS_FLEET, beatsExisting: true },
    { name: '3-class fleet', synth: [], sweep: [], fleet: THREE_CLASS_FLEET, beatsExisting: true },
    { name: 'costs misstated ±50%', synth: [], sweep: [], fleet: misstatedFleet, beatsExisting: true },
    { name: 'Mooncake trace', file: MOONCAKE, sweep: [] },
    { name: 'Mooncake, 2-class fleet', file: MOONCAKE, sweep: [], fleet: TWO_CLASS_FLEET, beatsExisting: true },
  ],
};

/** The column header of each set's table (regimes by default). */
export const SET_LABELS = /** @type {Record<string, string>} */ ({ perturbations: 'engine model' });

/**
 * A variant: `policy` run again with `sweep` flags, as a row named `name`, in a sweep of its own
 * per regime and seed. It runs only when `kvroute sweep --help` lists every flag of `needs`.
 * `existing`: the variant is the policy as it was before issue #28, so it counts among the
 * existing policies the ≥ 10% target is measured against (the plain row is then the new one).
 * @typedef {{ name: string, policy: string, sweep: string[], needs: string[], existing: boolean }} Variant
 */
/** @type {Variant[]} */
export const VARIANTS = [
  // Without the learned per-instance costs: the preset's coefficients for every instance.
  {
    name: 'min_ttft (fixed costs)',
    policy: 'min_ttft',
    sweep: ['--costs', 'fixed'],
    needs: ['--costs'],
    existing: false,
  },
  // Without the load of sessions idle between turns (issue #28, item 3: with and without the term).
  {
    name: 'min_ttft (no session returns)',
    policy: 'min_ttft',
    sweep: ['--no-session-returns'],
    needs: ['--no-session-returns'],
    existing: false,
  },
  // min_ttft as it was before issue #28: neither.
  {
    name: 'min_ttft (before #28)',
    policy: 'min_ttft',
    sweep: ['--costs', 'fixed', '--no-session-returns'],
    needs: ['--costs', '--no-session-returns'],
    existing: true,
  },
];

/**
 * The variants whose flags a `kvroute sweep --help` text lists.
 * @param {string} sweepHelp
 * @returns {{ runs: Variant[], skipped: { variant: Variant, missing: string[] }[] }}
 */
export function availableVariants(sweepHelp) {
  const lists = (/** @type {string} */ flag) => new RegExp(`^\\s*${flag}(?![\\w-])`, 'm').test(sweepHelp);
  /** @type {Variant[]} */
  const runs = [];
  /** @type {{ variant: Variant, missing: string[] }[]} */
  const skipped = [];
  for (const variant of VARIANTS) {
    const missing = variant.needs.filter((flag) => !lists(flag));
    if (missing.length === 0) runs.push(variant);
    else skipped.push({ variant, missing });
  }
  return { runs, skipped };
}

/**
 * The policies of the evaluation before issue #28 (docs/policy-evaluation.md): the "existing"
 * ones the targets compare with. A policy added since is not among them.
 */
export const EXISTING_POLICIES = [
  'round_robin',
  'session_hash',
  'load_only',
  'lmetric',
  'sticky',
  'unified',
  'unified+A+B',
  'unified_kv_both',
  'min_ttft',
];

/**
 * The regime's `--fleet` for `seed`, or undefined.
 * @param {Regime} regime
 * @param {number} seed
 */
export function regimeFleet(regime, seed) {
  return typeof regime.fleet === 'function' ? regime.fleet(seed) : regime.fleet;
}

/**
 * True when the regime fixes its own instances (`--instances` or a fleet), which a global
 * `--fleet` would contradict.
 * @param {Regime} regime
 */
export function ownsInstances(regime) {
  return regime.fleet !== undefined || regime.sweep.includes('--instances') || regime.sweep.includes('--fleet');
}
