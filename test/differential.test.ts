/**
 * Randomized differential tests: the addon and the TypeScript reference must
 * make the same decision, report the same matched blocks and scores, and hold
 * the same state, over thousands of generated multi-session requests per
 * policy, under eviction pressure, with load events, observed-state updates,
 * clock moves, block removals and instances coming and going; and, with
 * models, over random model sets per instance (wildcards and empty sets too),
 * a model per request (or none, or one nobody declares), model changes
 * mid-run and per-request blockTokens; and with the offload layer, whose
 * decisions, costs and prefill tickets (first tokens, completions and aborts
 * mixed in like any ticket's) must agree too; and with ringFirstTurn, whose
 * ring placements and bounded session entries must agree as well; and with
 * other replicas' load and session pins pushed in (the load plane).
 */
import { describe, expect, it } from 'vitest';

import { POLICY_NAMES, type PolicySpec } from '../src/index.js';
import { ALL_OUTCOMES, runScenario } from './helpers/differential-scenario.js';
import { Rng } from './helpers/random.js';

describe('native addon vs TypeScript reference', () => {
  it.each(POLICY_NAMES)('%s: same decisions, matches and scores over 3,000 requests', (policy) => {
    const { reasons, hits, decisions } = runScenario({
      seed: 11,
      policy,
      trace: {},
      capacityBlocks: 600,
      instances: 6,
    });
    expect(reasons.size).toBeGreaterThan(0);
    // Some decisions landed on cached prefixes, so matching was exercised.
    expect(hits / decisions).toBeGreaterThan(0.1);
  });

  it('unified exercises every one of its reasons on one trace', () => {
    const { reasons } = runScenario({ seed: 5, policy: 'unified+A+B', trace: {}, capacityBlocks: 600, instances: 6 });
    expect([...reasons].sort()).toEqual(['affinity', 'fallback', 'overload']);
  });

  it('unified_kv_both reaches kv_pressure', () => {
    const { reasons } = runScenario({
      seed: 9,
      policy: 'unified_kv_both',
      trace: {},
      capacityBlocks: 400,
      instances: 4,
    });
    expect(reasons.has('kv_pressure')).toBe(true);
  });

  it('min_ttft exercises every one of its reasons on one trace', () => {
    const { reasons } = runScenario({ seed: 5, policy: 'min_ttft', trace: {}, capacityBlocks: 600, instances: 6 });
    expect([...reasons].sort()).toEqual(['cache_slack', 'min_ttft', 'spread']);
  });

  it('min_ttft with random tunables, models and prompt-text requests', () => {
    const rng = new Rng(61);
    for (let round = 0; round < 4; round += 1) {
      const policy: PolicySpec = {
        name: 'min_ttft',
        batchWeight: rng.pick([0, 0.01, 0.05, 0.3, 2]),
        attentionWeight: rng.pick([0, 1.213e-4, 1e-3]),
        affinitySlack: rng.pick([0, 0.1, 0.3, 1.5]),
        tieTolerance: rng.pick([0, 0.02, 0.2]),
        kvWeight: rng.pick([0, 1, 8]),
        kvThreshold: rng.pick([0, 0.5, 0.9]),
      };
      runScenario({
        seed: 67 + round,
        policy,
        trace: { requests: 1200, bigIds: round % 2 === 1 },
        capacityBlocks: 500,
        instances: 5,
        models: round >= 2,
        promptShare: 0.2,
      });
    }
  });

  it.each(['unified', 'sticky', 'lmetric', 'min_ttft'] as const)('%s with full-range 64-bit ids', (policy) => {
    runScenario({ seed: 23, policy, trace: { bigIds: true, requests: 2000 }, capacityBlocks: 500, instances: 5 });
  });

  it.each(['unified', 'session_hash'] as const)('%s with prompt-text requests mixed in', (policy) => {
    runScenario({ seed: 31, policy, trace: { requests: 1500 }, capacityBlocks: 800, instances: 4, promptShare: 0.3 });
  });

  it.each(POLICY_NAMES)('%s with models: same decisions, refusals, matches and scores', (policy) => {
    const { reasons, hits, decisions } = runScenario({
      seed: 53,
      policy,
      trace: { requests: 2500 },
      capacityBlocks: 600,
      instances: 7,
      models: true,
    });
    expect(reasons.size).toBeGreaterThan(0);
    expect(decisions).toBeGreaterThan(1500);
    expect(hits / decisions).toBeGreaterThan(0.1);
  });

  it('unified with models and prompt-text requests exercises every reason', () => {
    const { reasons } = runScenario({
      seed: 59,
      policy: 'unified+A+B',
      trace: { requests: 2000 },
      capacityBlocks: 600,
      instances: 7,
      models: true,
      promptShare: 0.2,
    });
    expect([...reasons].sort()).toEqual(['affinity', 'fallback', 'overload']);
  });

  it.each(['v3', 'min_ttft+offload', 'lmetric+offload', 'sticky+offload', 'round_robin+offload'] as const)(
    '%s: same decisions, offload outcomes, costs and prefill tickets',
    (policy) => {
      const { offloads, prefillTickets, decisions } = runScenario({
        seed: 71,
        policy,
        trace: { requests: 2000, firstTurnBlocks: [60, 400], appendBlocks: [1, 90] },
        capacityBlocks: 2500,
        instances: 10,
        dryShare: 0.05,
      });
      expect([...offloads].sort()).toEqual(ALL_OUTCOMES);
      expect(prefillTickets).toBeGreaterThan(decisions / 20);
    },
  );

  it.each([
    ['v3', 71],
    ['min_ttft+offload', 71],
    ['lmetric+offload', 71],
  ] as const)(
    '%s with chargePrefill: same decisions, outcomes, costs (extraPrefillMs too) and prefill tickets',
    (name, seed) => {
      const { offloads, prefillTickets } = runScenario({
        seed,
        policy: { name, offload: { chargePrefill: true } },
        trace: { requests: 2000, firstTurnBlocks: [60, 400], appendBlocks: [1, 90] },
        capacityBlocks: 2500,
        instances: 10,
        dryShare: 0.05,
      });
      expect([...offloads].sort()).toEqual(ALL_OUTCOMES);
      expect(prefillTickets).toBeGreaterThan(0);
    },
  );

  it.each([false, true])(
    'cheap transfers and a low threshold reach every offload outcome, with models and prompt text (chargePrefill %s)',
    (chargePrefill) => {
      const policy: PolicySpec = {
        name: 'unified+A+B',
        offload: chargePrefill
          ? { thresholdTokens: 300, coldPenaltyMs: 400, chargePrefill }
          : { thresholdTokens: 300, coldPenaltyMs: 400 },
      };
      const seen = new Set<string>();
      for (const [seed, models] of [
        [73, false],
        [79, true],
      ] as const) {
        const { offloads } = runScenario({
          seed,
          policy,
          trace: { requests: 1500, firstTurnBlocks: [20, 300], appendBlocks: [1, 60] },
          capacityBlocks: 2000,
          instances: 8,
          models,
          promptShare: 0.1,
          dryShare: 0.05,
        });
        offloads.forEach((o) => seen.add(o));
      }
      expect([...seen].sort()).toEqual(ALL_OUTCOMES);
    },
  );

  it.each(['min_ttft', 'unified+A+B', 'unified_kv_both', 'lmetric', 'sticky', 'min_ttft+offload'] as const)(
    '%s with ringFirstTurn: same ring placements, entries and later decisions',
    (name) => {
      const { reasons, decisions } = runScenario({
        seed: 83,
        policy: { name, ringFirstTurn: 1 },
        trace: { requests: 2000 },
        capacityBlocks: 600,
        instances: 6,
        dryShare: 0.05,
      });
      expect(reasons.has('ring_first_turn')).toBe(true);
      // Later turns of known sessions still follow the policy.
      expect(reasons.size).toBeGreaterThan(1);
      expect(decisions).toBeGreaterThan(1500);
    },
  );

  it('ringFirstTurn with random tunables, models, prompt text and a session table that overflows', () => {
    const rng = new Rng(89);
    for (let round = 0; round < 4; round += 1) {
      const policy: PolicySpec = {
        name: rng.pick(['min_ttft', 'unified', 'sticky'] as const),
        ringFirstTurn: 1,
        ringVnodes: rng.pick([1, 7, 160]),
        affinitySlack: rng.pick([0, 0.3, 1.5]),
      };
      const { reasons } = runScenario({
        seed: 97 + round,
        policy,
        trace: { requests: 1200, bigIds: round % 2 === 1 },
        capacityBlocks: 500,
        instances: 5,
        models: round >= 2,
        promptShare: 0.2,
        maxSessions: rng.pick([4, 16, 1 << 20]),
      });
      expect(reasons.has('ring_first_turn')).toBe(true);
    }
  });

  it.each(['min_ttft', 'min_ttft+offload', 'lmetric'] as const)(
    '%s with learned costs and returning sessions pushed per instance: same decisions and scores',
    (policy) => {
      const { reasons, decisions } = runScenario({
        seed: 41,
        policy,
        trace: {},
        capacityBlocks: 600,
        instances: 6,
        costs: true,
        dryShare: 0.05,
      });
      expect(decisions).toBeGreaterThan(2500);
      expect(reasons.size).toBeGreaterThan(policy === 'lmetric' ? 0 : 2);
    },
  );

  it.each(['min_ttft', 'lmetric', 'unified+A+B', 'sticky', 'min_ttft+offload'] as const)(
    "%s with peers' load and session pins pushed in: same decisions and scores",
    (name) => {
      const { reasons, decisions } = runScenario({
        seed: 59,
        policy: { name, ringFirstTurn: name === 'sticky' ? 0 : 1 },
        trace: { requests: 2000 },
        capacityBlocks: 600,
        instances: 6,
        peers: true,
        models: name === 'min_ttft',
        dryShare: 0.05,
      });
      expect(decisions).toBeGreaterThan(1500);
      expect(reasons.size).toBeGreaterThan(1);
    },
  );

  it('64 instances, tiny caches', () => {
    runScenario({
      seed: 41,
      policy: 'unified',
      trace: { requests: 1500, concurrentSessions: 80 },
      capacityBlocks: 60,
      instances: 64,
    });
  });
});
