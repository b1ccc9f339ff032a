/**
 * Mixed fleets (docs/engine-model.md#mixed-fleets): parseFleet reads `--fleet` specs and refuses
 * bad ones naming the flag and the reason; the simulator gives each engine its group's
 * multipliers, so a fast group answers faster, while a uniform fleet is `instances` unchanged.
 */
import { describe, expect, it } from 'vitest';

import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS, scalePreset } from '../src/sim/engine-preset.js';
import {
  FleetSpecError,
  fleetPresets,
  fleetSize,
  formatFleet,
  groupOfInstance,
  isUniformFleet,
  MAX_FLEET_INSTANCES,
  parseFleet,
  uniformFleet,
} from '../src/sim/fleet-spec.js';
import { simulate } from '../src/sim/simulator.js';
import type { RequestRecord } from '../src/trace/records.js';
import { synthesizeTrace } from '../src/trace/synth.js';

const ONE = { prefillCost: 1, decodeCost: 1, kvCapacity: 1 };

describe('parseFleet', () => {
  it('reads groups, their counts and their multipliers, in order', () => {
    const fleet = parseFleet('3,5:prefill=0.7:decode=0.8');
    expect(fleet).toEqual([
      { count: 3, scaling: ONE },
      { count: 5, scaling: { prefillCost: 0.7, decodeCost: 0.8, kvCapacity: 1 } },
    ]);
    expect(fleetSize(fleet)).toBe(8);
    expect(groupOfInstance(fleet)).toEqual([0, 0, 0, 1, 1, 1, 1, 1]);
    expect(isUniformFleet(fleet)).toBe(false);
    expect(parseFleet('2:kv=0.5:decode=2,1:prefill=1.5')).toEqual([
      { count: 2, scaling: { prefillCost: 1, decodeCost: 2, kvCapacity: 0.5 } },
      { count: 1, scaling: { prefillCost: 1.5, decodeCost: 1, kvCapacity: 1 } },
    ]);
  });

  it('`N` alone is N preset instances, as --instances N', () => {
    expect(parseFleet('4')).toEqual(uniformFleet(4));
    expect(isUniformFleet(parseFleet('4'))).toBe(true);
    expect(isUniformFleet(parseFleet('2,2:prefill=1'))).toBe(true);
  });

  it('formats back to a spec that parses to the same fleet', () => {
    for (const spec of ['3,5:prefill=0.7:decode=0.8', '1:kv=0.25', '8', '2:prefill=2:decode=3:kv=4,1'])
      expect(parseFleet(formatFleet(parseFleet(spec)))).toEqual(parseFleet(spec));
    expect(formatFleet(parseFleet('5:decode=0.8:prefill=0.7, 3'))).toBe('5:prefill=0.7:decode=0.8,3');
  });

  it.each([
    ['', 'is empty'],
    ['  ', 'is empty'],
    ['3,', 'group 2 has no count'],
    [':prefill=2', 'group 1 has no count'],
    ['2.5', 'group 1: count must be a positive integer, got 2.5'],
    ['-1', 'group 1: count must be a positive integer, got -1'],
    ['x', 'group 1: count must be a positive integer, got x'],
    ['0', 'group 1: count must be a positive integer, got 0'],
    ['2,0:prefill=2', 'group 2: count must be a positive integer, got 0'],
    ['2:speed=2', "group 1: unknown key 'speed' (prefill, decode or kv)"],
    ['2:prefill=2:prefill=3', 'group 1: prefill given twice'],
    ['2:prefill', "group 1: prefill must be a number (a multiplier such as 0.7), got ''"],
    ['2:decode=abc', "group 1: decode must be a number (a multiplier such as 0.7), got 'abc'"],
    ['2:kv=0', 'group 1: kv must be greater than 0, got 0'],
    ['2:kv=-0.5', 'group 1: kv must be greater than 0, got -0.5'],
    ['2:prefill=Infinity', 'group 1: prefill must be finite, got Infinity'],
    ['2:decode=NaN', "group 1: decode must be a number (a multiplier such as 0.7), got 'NaN'"],
    ['2:decode=101', 'group 1: decode must be at most 100, got 101'],
    [`${MAX_FLEET_INSTANCES},1`, `has ${MAX_FLEET_INSTANCES + 1} instances in all, more than ${MAX_FLEET_INSTANCES}`],
  ])('refuses %j: %s', (spec, reason) => {
    expect(() => parseFleet(spec)).toThrow(FleetSpecError);
    expect(() => parseFleet(spec)).toThrow(`--fleet ${reason}`);
  });
});

describe('fleetPresets', () => {
  const preset = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
  it("gives each instance its group's factors on top of the fleet-wide ones", () => {
    const global = scalePreset(preset, { prefillCost: 2 });
    const presets = fleetPresets(global, parseFleet('1,2:prefill=0.5:kv=0.5'));
    expect(presets[0]).toBe(global);
    expect(presets[1]).toBe(presets[2]);
    expect(presets[1]!.prefillMsPerToken).toBeCloseTo(preset.prefillMsPerToken, 12);
    expect(presets[1]!.kvCacheBytes).toBe(preset.kvCacheBytes * 0.5);
  });
});

describe('simulate with a mixed fleet', () => {
  const trace = [...synthesizeTrace({ sessions: 40, seed: 5 })];

  const meanTtftPerToken = (records: RequestRecord[], instances: Set<number>) => {
    const chosen = records.filter((r) => instances.has(r.instance) && r.input_tokens - r.cached_tokens > 512);
    expect(chosen.length).toBeGreaterThan(10);
    // TTFT per uncached prompt token: comparable across requests of different sizes.
    return (
      chosen.reduce((sum, r) => sum + (r.first_token - r.dispatch) / (r.input_tokens - r.cached_tokens), 0) /
      chosen.length
    );
  };

  it('the fast group prefills measurably faster than the slow one; the router sees ids only', () => {
    const fleet = parseFleet('2,2:prefill=0.5:decode=0.5');
    const { records, engineCapacityBlocks } = simulate(trace, { policy: 'round_robin', instances: 4, fleet });
    const slow = meanTtftPerToken(records, new Set([0, 1]));
    const fast = meanTtftPerToken(records, new Set([2, 3]));
    expect(fast).toBeLessThan(slow * 0.75);
    expect(new Set(engineCapacityBlocks).size).toBe(1);
  });

  it('a group with kv=0.5 has half the blocks', () => {
    const { engineCapacityBlocks, capacityBlocks } = simulate(trace.slice(0, 20), {
      policy: 'unified',
      instances: 3,
      fleet: parseFleet('1,2:kv=0.5'),
    });
    expect(engineCapacityBlocks[0]).toBe(capacityBlocks);
    expect(Math.abs(engineCapacityBlocks[1]! - capacityBlocks / 2)).toBeLessThanOrEqual(1);
  });

  it('a uniform fleet gives the records of `instances`, exactly', () => {
    for (const policy of ['unified', 'lmetric'] as const) {
      const plain = simulate(trace, { policy, instances: 4 });
      const fleet = simulate(trace, { policy, instances: 4, fleet: parseFleet('4') });
      expect(fleet.records).toEqual(plain.records);
      expect(simulate(trace, { policy, instances: 4, fleet: parseFleet('1,3') }).records).toEqual(plain.records);
    }
  });

  it('refuses a fleet whose size is not `instances`', () => {
    expect(() => simulate(trace, { policy: 'unified', instances: 3, fleet: parseFleet('4') })).toThrow(
      "instances must be the fleet's size, 4, got 3",
    );
  });
});
