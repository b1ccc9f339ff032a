/**
 * scripts/policy-eval/: the generalization set's regimes (every fleet a valid `--fleet` spec, the
 * misstated-cost fleet deterministic per seed and within ±50%), the variants, and the targets
 * check (which policies count as existing, the pass marks, the table). The sweeps themselves are
 * `kvroute sweep`'s, tested with it.
 */
import { describe, expect, it } from 'vitest';

import { parseFleet } from '../src/sim/fleet-spec.js';
import {
  availableVariants,
  EXISTING_POLICIES,
  misstatedFleet,
  ownsInstances,
  regimeFleet,
  SETS,
  VARIANTS,
} from '../scripts/policy-eval/sets.mjs';
import { checkTargets, targetRecord } from '../scripts/policy-eval/targets.mjs';
import { targetsMarkdown } from '../src/report/evaluation-targets.js';

describe('the misstated-cost fleet', () => {
  it('is one group of 1 per instance, each multiplier in [0.5, 1.5], the same for the same seed', () => {
    const spec = misstatedFleet(11);
    expect(misstatedFleet(11)).toBe(spec);
    expect(misstatedFleet(12)).not.toBe(spec);
    const groups = parseFleet(spec);
    expect(groups).toHaveLength(8);
    for (const g of groups) {
      expect(g.count).toBe(1);
      for (const x of [g.scaling.prefillCost, g.scaling.decodeCost]) {
        expect(x).toBeGreaterThanOrEqual(0.5);
        expect(x).toBeLessThanOrEqual(1.5);
      }
      expect(g.scaling.kvCapacity).toBe(1);
    }
  });

  it('spreads over the whole range across seeds', () => {
    const all = Array.from({ length: 50 }, (_, seed) => parseFleet(misstatedFleet(seed))).flat();
    const prefill = all.map((g) => g.scaling.prefillCost);
    expect(Math.min(...prefill)).toBeLessThan(0.55);
    expect(Math.max(...prefill)).toBeGreaterThan(1.45);
  });
});

describe('the generalization set', () => {
  const set = SETS.generalization!;

  it('covers item 5’s regimes, each fleet a valid spec of 8 instances', () => {
    expect(set.map((r) => r.name)).toEqual([
      'time scale 0.5×',
      'time scale 0.7×',
      'Poisson arrivals',
      'on-off arrivals (30 s / 90 s)',
      '2-class fleet',
      '3-class fleet',
      'costs misstated ±50%',
      'Mooncake trace',
      'Mooncake, 2-class fleet',
    ]);
    for (const regime of set) {
      const fleet = regimeFleet(regime, 11);
      if (fleet === undefined) continue;
      expect(parseFleet(fleet).reduce((n, g) => n + g.count, 0)).toBe(8);
      expect(ownsInstances(regime)).toBe(true);
    }
    expect(set.filter((r) => r.beatsExisting).map((r) => r.name)).toEqual([
      '2-class fleet',
      '3-class fleet',
      'costs misstated ±50%',
      'Mooncake, 2-class fleet',
    ]);
  });

  it('has min_ttft without each of issue #28’s parts, and without both as the existing one', () => {
    expect(VARIANTS.map((v) => [v.name, v.sweep.join(' '), v.existing])).toEqual([
      ['min_ttft (fixed costs)', '--costs fixed', false],
      ['min_ttft (no session returns)', '--no-session-returns', false],
      ['min_ttft (before #28)', '--costs fixed --no-session-returns', true],
    ]);
  });

  it('runs a variant only when sweep --help lists every flag it needs', () => {
    const help = (flags: string[]) => ['Options:', ...flags.map((f) => `  ${f}    what it does`)].join('\n');
    const names = (text: string) => availableVariants(text).runs.map((v) => v.name);
    expect(names(help(['--trace <IN>']))).toEqual([]);
    expect(names(help(['--costs <learned|fixed>']))).toEqual(['min_ttft (fixed costs)']);
    expect(names(help(['--costs <learned|fixed>', '--no-session-returns']))).toHaveLength(3);
    // A flag that merely starts with the name is not it.
    expect(names(help(['--costs-file <F>']))).toEqual([]);
    expect(availableVariants(help([])).skipped[2]).toMatchObject({ missing: ['--costs', '--no-session-returns'] });
  });
});

describe('the targets', () => {
  const run = (ttft: number, apc = 0.79, hotspot = 1.5) => [{ seed: 1, ttft_p90: ttft, apc, hotspot }];
  const existing = [...EXISTING_POLICIES, 'min_ttft (before #28)'];

  it('measures the default against every other policy and against the existing ones', () => {
    const row = checkTargets(
      '2-class fleet',
      {
        lmetric: run(6),
        unified: run(7, 0.8, 1.6),
        'min_ttft (fixed costs)': run(4.9),
        'min_ttft (before #28)': run(5),
        new_policy: run(4.4),
        min_ttft: run(4.42, 0.795, 1.55),
      },
      { defaultPolicy: 'min_ttft', existing, beatsExisting: true },
    );
    expect(row.bestOther.policy).toBe('new_policy');
    expect(row.bestExisting.policy).toBe('min_ttft (before #28)');
    expect([row.rank, row.of]).toEqual([2, 6]);
    expect(row.pass).toEqual({ best: true, existing: true, apc: true, hotspot: true });
    expect(targetRecord(row)).toMatchObject({ best_existing: { policy: 'min_ttft (before #28)', ttft_p90: 5 } });
  });

  it('fails each target past its bound, and leaves the 10% one out where it does not apply', () => {
    const row = checkTargets(
      'default',
      { lmetric: run(5), unified: run(6, 0.8, 1.4), min_ttft: run(5.06, 0.789, 1.45) },
      { defaultPolicy: 'min_ttft', existing, beatsExisting: false },
    );
    expect(row.pass).toEqual({ best: false, existing: undefined, apc: false, hotspot: false });
    expect(targetRecord(row).pass).toEqual({ best: false, apc: false, hotspot: false });
    const table = targetsMarkdown(new Map([['default', targetRecord(row)]]), 'regime').join('\n');
    expect(table).toContain(
      '| default | 5.06 | 2 of 3 | lmetric 5.00 | +1.2% ✗ | lmetric 5.00 | +1.2% | 78.9% / 80.0% ✗ |',
    );
    expect(table).toContain('1.45 / 1.40 ✗ |');
    expect(table).toContain(
      '- ≥ 10% below the best existing policy (mixed fleets, misstated costs): met in 0 of 0 regimes',
    );
  });

  it('refuses a regime without the default or unified', () => {
    expect(() =>
      checkTargets('x', { lmetric: run(5) }, { defaultPolicy: 'min_ttft', existing, beatsExisting: false }),
    ).toThrow(/x: the default policy, unified/);
  });
});
