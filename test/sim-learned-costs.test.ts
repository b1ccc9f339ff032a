/**
 * The simulator's cost learners (src/sim/sim-cost-learning.ts, docs/policies.md "Learned costs
 * in the simulator"): with `costs: 'fixed'` they change no routing decision (the records are
 * byte-identical with `learnCosts: false`); with `costs: 'learned'` (the default) they steer, so a
 * mixed fleet's fast instances take more of the work. `sim run --fleet 2,2:prefill=0.5 --json`
 * reports, for every instance (≥ 200 observations each with fixed costs, on a 300-session
 * synthesized trace), a learned prefill cost within 10% of its engine's true one, steering or not.
 */
import { describe, expect, it } from 'vitest';

import type { LearnedCostFields } from '../src/cli/learned-costs.js';
import { parseFleet } from '../src/sim/fleet-spec.js';
import { simulate, type SimulationOptions } from '../src/sim/simulator.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import { kvroute, synthTraceDir } from './helpers/cli-trace.js';

// 1,436 requests, 285 to 428 on each of 4 instances; unlike the shipped Mooncake trace on 4
// instances, it does not overload them (docs/policies.md says what overload does to the fit).
const { traceFile: trace300 } = synthTraceDir('learned-costs', ['--sessions', '300', '--seed', '3']);

describe('the simulator with and without its cost learners', () => {
  const trace = [...synthesizeTrace({ sessions: 60, seed: 5, duration: 120 })];
  const RUNS: Array<[string, Omit<SimulationOptions, 'native'>]> = [
    ['min_ttft on a mixed fleet', { policy: 'min_ttft', instances: 4, fleet: parseFleet('2,2:prefill=0.5') }],
    ['lmetric with shm state', { policy: 'lmetric', instances: 3, engineState: 'shm' }],
    ['min_ttft over 2 replicas', { policy: 'min_ttft', instances: 4, replicas: 2 }],
  ];
  describe.each([
    { impl: 'native', native: true },
    { impl: 'reference', native: false },
  ])('$impl core', ({ native }) => {
    it.each(RUNS)('%s: byte-identical records with fixed costs', (_, options) => {
      const learning = simulate(trace, { ...options, native, costs: 'fixed' });
      const without = simulate(trace, { ...options, native, learnCosts: false });
      expect(JSON.stringify(learning.records)).toBe(JSON.stringify(without.records));
      expect(without.learnedCosts).toEqual([]);
      expect(learning.learnedCosts.map((c) => c.instance)).toEqual([...Array(options.instances).keys()]);
      const observed = learning.learnedCosts.reduce((sum, c) => sum + c.learned.ttftObservations, 0);
      expect(observed).toBeGreaterThan(0);
    });

    it('steers with learned costs: the fast half of a mixed fleet takes more requests', () => {
      const options = { policy: 'min_ttft', instances: 4, fleet: parseFleet('2,2:prefill=0.5'), native } as const;
      const count = (costs: 'learned' | 'fixed') => {
        const perInstance = [0, 0, 0, 0];
        for (const r of simulate(trace, { ...options, costs }).records) perInstance[r.instance]! += 1;
        return perInstance[2]! + perInstance[3]! - perInstance[0]! - perInstance[1]!;
      };
      expect(count('learned')).toBeGreaterThan(count('fixed'));
      expect(() => simulate(trace, { ...options, costs: 'learned', learnCosts: false })).toThrow(/costs/);
      expect(() => simulate(trace, { ...options, costs: 'bogus' as 'fixed' })).toThrow(/costs .*learned, fixed/);
    });
  });
});

describe('sim run learned_costs', () => {
  it.each(['fixed', 'learned'])('learns every instance of --fleet 2,2:prefill=0.5 within 10%% (--costs %s)', (mode) => {
    const run = kvroute(['sim', 'run', trace300, '--fleet', '2,2:prefill=0.5', '--costs', mode, '--json']);
    expect(run.status, run.stderr).toBe(0);
    const costs = (JSON.parse(run.stdout) as { learned_costs: LearnedCostFields[] }).learned_costs;
    expect(costs.map((c) => c.group)).toEqual(['2', '2', '2:prefill=0.5', '2:prefill=0.5']);
    for (const cost of costs) {
      const fast = cost.group === '2:prefill=0.5';
      expect(cost.truth.prefill_s_per_token).toBeCloseTo((fast ? 0.5 : 1) * 0.04518e-3, 12);
      expect(cost.truth.prefill_tokens_per_s).toBeCloseTo(1 / cost.truth.prefill_s_per_token, 6);
      expect(cost.prefill_relative_error).toBeCloseTo(
        cost.learned.prefill_s_per_token / cost.truth.prefill_s_per_token - 1,
        12,
      );
      // Steering sends the slow half fewer requests (about 160 each here) than 200.
      expect(cost.ttft_observations).toBeGreaterThanOrEqual(mode === 'fixed' ? 200 : 100);
      expect(Math.abs(cost.prefill_relative_error)).toBeLessThan(0.1);
    }
  });

  it('prints the learned costs table, and no group on a uniform fleet', () => {
    const run = kvroute(['sim', 'run', trace300, '--instances', '2']);
    expect(run.status, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/learned costs .*\n {2}instance 0 {2}learned [\d.]+ k tok\/s {2}true 22\.1 k tok\/s/);
    const json = kvroute(['sim', 'run', trace300, '--instances', '2', '--json']);
    const costs = (JSON.parse(json.stdout) as { learned_costs: LearnedCostFields[] }).learned_costs;
    expect(costs.every((c) => c.group === undefined)).toBe(true);
  });
});
