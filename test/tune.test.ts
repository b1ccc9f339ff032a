/**
 * `kvroute tune`'s pieces without the simulator: the table of tunables and resolvePolicy's use
 * of it, --param parsing, and the search's points (grid, maximin Latin hypercube, refinement).
 */
import { describe, expect, it } from 'vitest';

import { UsageError } from '../src/cli/common.js';
import { parseParams, type ParamRange } from '../src/cli/tune-params.js';
import { exploreRound, pointKey, refineRound } from '../src/cli/tune-search.js';
import { POLICY_KINDS } from '../src/core/codes.js';
import { resolvePolicy, TUNABLE_NAMES, TUNABLES, tunablesOf } from '../src/core/policy-spec.js';

describe('the table of tunables', () => {
  it('has a row per numeric field of a resolved policy, with valid kinds and a default inside its range', () => {
    const resolved = resolvePolicy('unified');
    // The offload layer's cost model is a field of its own, not a tunable (null without the layer).
    expect(resolved.offload).toBeNull();
    const numeric = Object.keys(resolved).filter((key) => !['name', 'kind', 'offload'].includes(key));
    expect(TUNABLE_NAMES).toEqual(numeric);
    for (const name of TUNABLE_NAMES) {
      const row = TUNABLES[name];
      expect(row.kinds.length).toBeGreaterThan(0);
      for (const kind of row.kinds) expect(POLICY_KINDS).toContain(kind);
      expect(row.default).toBeGreaterThanOrEqual(row.min);
      expect(row.default).toBeLessThanOrEqual(row.max);
      expect(row.meaning).not.toMatch(/\n/);
    }
  });

  it('is what resolvePolicy fills in and enforces; presets override the defaults', () => {
    for (const name of TUNABLE_NAMES) {
      const row = TUNABLES[name];
      expect(resolvePolicy('unified')[name]).toBe(row.default);
      expect(resolvePolicy({ name: 'unified', [name]: row.max })[name]).toBe(row.max);
      expect(() => resolvePolicy({ name: 'unified', [name]: row.max + 1 })).toThrow(`policy.${name}`);
      expect(() => resolvePolicy({ name: 'unified', [name]: row.min - 1 })).toThrow(`policy.${name}`);
    }
    expect(() => resolvePolicy({ name: 'session_hash', ringVnodes: 1.5 })).toThrow(/policy\.ringVnodes/);
    expect(resolvePolicy('unified+A+B')).toMatchObject({
      overloadFactor: 1.3,
      decodeWeight: 0.01,
      affinityThreshold: 0.5,
    });
  });

  it('says which kinds read what', () => {
    expect(tunablesOf('unified')).toEqual(['affinityThreshold', 'overloadFactor', 'decodeWeight', 'ringFirstTurn']);
    expect(tunablesOf('lmetric')).toEqual(['decodeWeight', 'ringFirstTurn']);
    expect(tunablesOf('session_hash')).toEqual(['ringVnodes']);
    expect(tunablesOf('sticky')).toEqual(['ringFirstTurn']);
    expect(tunablesOf('load_only')).toEqual([]);
  });
});

describe('--param', () => {
  it('parses name=lo:hi items in order', () => {
    expect(parseParams('overloadFactor=1:3, decodeWeight=0:0.5', 'unified+A+B')).toEqual([
      { name: 'overloadFactor', lo: 1, hi: 3, integer: false },
      { name: 'decodeWeight', lo: 0, hi: 0.5, integer: false },
    ]);
    expect(parseParams('ringVnodes=8:8', 'session_hash')).toEqual([
      { name: 'ringVnodes', lo: 8, hi: 8, integer: true },
    ]);
  });

  it('refuses with a UsageError naming the item', () => {
    expect(() => parseParams('nope=1:2', 'unified')).toThrow(UsageError);
    expect(() => parseParams('nope=1:2', 'unified')).toThrow(/^--param nope=1:2: unknown parameter "nope"/);
  });
});

const range = (name: ParamRange['name'], lo: number, hi: number, integer = false): ParamRange => ({
  name,
  lo,
  hi,
  integer,
});

describe('the search', () => {
  it('is the grid of every combination when it fits in the budget', () => {
    const round = exploreRound([range('ringVnodes', 1, 3, true), range('decodeWeight', 0.5, 0.5)], 4, 1);
    expect(round.method).toBe('grid');
    expect(round.points).toEqual([
      [1, 0.5],
      [2, 0.5],
      [3, 0.5],
    ]);
    expect(exploreRound([range('ringVnodes', 1, 5, true)], 4, 1).method).toBe('maximin-lhs');
    expect(exploreRound([range('decodeWeight', 0, 1)], 1000, 1).method).toBe('maximin-lhs');
  });

  it('gives one parameter n evenly spaced values, both bounds included', () => {
    expect(exploreRound([range('overloadFactor', 1, 3)], 5, 9).points).toEqual([[1], [1.5], [2], [2.5], [3]]);
  });

  it('is a Latin hypercube: each parameter takes each of its n levels once; seeded', () => {
    const ranges = [range('affinityThreshold', 0, 1), range('overloadFactor', 1, 3), range('decodeWeight', 0, 0.7)];
    const round = exploreRound(ranges, 8, 1);
    expect(round.points).toHaveLength(8);
    ranges.forEach((r, i) => {
      const levels = Array.from({ length: 8 }, (_, k) => Number((r.lo + (k * (r.hi - r.lo)) / 7).toPrecision(12)));
      expect(round.points.map((p) => p[i]).sort((a, b) => a! - b!)).toEqual(levels);
    });
    expect(exploreRound(ranges, 8, 1)).toEqual(round);
    const others = [2, 3, 4].map((seed) => exploreRound(ranges, 8, seed).points.map(pointKey).join(' '));
    expect(others.some((design) => design !== round.points.map(pointKey).join(' '))).toBe(true);
  });

  it('rounds integer levels and keeps equal points once', () => {
    const round = exploreRound([range('ringVnodes', 1, 3, true), range('decodeWeight', 0, 1)], 8, 1);
    expect(new Set(round.points.map((p) => p[0]))).toEqual(new Set([1, 2, 3]));
    expect(new Set(round.points.map(pointKey)).size).toBe(round.points.length);
  });

  it('refines inside one level spacing of the best, clipped to the bounds, skipping points seen', () => {
    const ranges = [range('overloadFactor', 1, 3), range('decodeWeight', 0, 1)];
    const explore = exploreRound(ranges, 5, 1);
    const best = [1.5, 0];
    const refine = refineRound(ranges, best, 5, 4, 1, new Set(explore.points.map(pointKey)));
    expect(refine.points).toHaveLength(4);
    for (const [factor, weight] of refine.points) {
      expect(factor).toBeGreaterThan(1);
      expect(factor).toBeLessThan(2);
      expect(weight).toBeGreaterThanOrEqual(0);
      expect(weight).toBeLessThan(0.25);
    }
    const seen = new Set(refine.points.map(pointKey));
    expect(refineRound(ranges, best, 5, 4, 1, seen).points).toEqual([]);
  });
});
