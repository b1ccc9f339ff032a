/**
 * How well the hash_ids index predicts the simulated engines' cached tokens (docs/analysis.md
 * "Prediction"): exact when nothing is evicted and a session's turns wait for each other; off
 * when the engines evict (mostly over-predicted: the router expected blocks the engine had lost),
 * and off without eviction when turns overlap (poisson dispatch: over-predicted only, since the
 * router counts a block as cached at dispatch, before the engine has computed it).
 */
import { describe, expect, it } from 'vitest';

import { predictionAccuracy } from '../src/analysis/prediction-accuracy.js';
import { simulate } from '../src/sim/simulator.js';
import { synthesizeTrace } from '../src/trace/synth.js';

/** Far more KV blocks per engine than any synth trace here holds: nothing is evicted. */
const AMPLE = 200_000;

describe('prediction accuracy in the simulator, hash_ids mode', () => {
  it('is exact with ample KV capacity and session-sequential dispatch', () => {
    for (const seed of [2, 3, 7])
      for (const policy of ['unified+A+B', 'min_ttft'] as const)
        for (const instances of [1, 2, 4]) {
          const trace = [...synthesizeTrace({ sessions: 30, seed, duration: 60 })];
          const result = simulate(trace, { policy, instances, capacityBlocks: AMPLE });
          expect(result.evictions).toBe(0);
          expect(result.records.every((r) => typeof r.predicted_cached_tokens === 'number')).toBe(true);
          const p = predictionAccuracy(result.records)!;
          expect(p.requests).toBe(trace.length);
          expect(p.actual_apc).toBeGreaterThan(0.5); // the cache is used: exactness is not all zeros
          expect(p.exact_fraction).toBe(1);
          expect(p.mae_tokens).toBe(0);
        }
  });

  it('over- and under-predicts when the engines evict, over-prediction dominating', () => {
    const trace = [...synthesizeTrace({ sessions: 40, seed: 2, duration: 60 })];
    const result = simulate(trace, { policy: 'unified+A+B', instances: 2, capacityBlocks: 9_000 });
    expect(result.evictions).toBeGreaterThan(0);
    const p = predictionAccuracy(result.records)!;
    expect(p.exact_fraction).toBeLessThan(1);
    expect(p.exact_fraction).toBeGreaterThan(0.8);
    expect(p.over.requests).toBeGreaterThan(p.under.requests);
    expect(p.lost_apc).toBeGreaterThan(p.unpredicted_apc);
    expect(p.predicted_apc).toBeGreaterThan(p.actual_apc);
  });

  it('over-predicts without eviction when a session’s turns overlap (poisson dispatch)', () => {
    const trace = [...synthesizeTrace({ sessions: 30, seed: 3, duration: 60 })];
    const result = simulate(trace, {
      policy: 'unified+A+B',
      instances: 2,
      capacityBlocks: AMPLE,
      dispatch: { mode: 'poisson', rate: 4, seed: 1 },
    });
    expect(result.evictions).toBe(0);
    const p = predictionAccuracy(result.records)!;
    expect(p.exact_fraction).toBeLessThan(1);
    expect(p.under.requests).toBe(0);
    expect(p.over.requests).toBeGreaterThan(0);
  });
});
