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
 * ring placements and bounded session entries must agree as well.
 */
import { describe, expect, it } from 'vitest';

import {
  POLICY_NAMES,
  type PolicyName,
  type PolicySpec,
  type RouteRequest,
  type Router,
  type RoutingCosts,
} from '../src/index.js';
import { Rng } from './helpers/random.js';
import { comparableStats, twins } from './helpers/routers.js';
import { generateTrace, type TraceOptions, type TraceRequest } from './helpers/trace-gen.js';

interface Scenario {
  seed: number;
  policy: PolicyName | PolicySpec;
  trace: Partial<TraceOptions>;
  capacityBlocks: number;
  instances: number;
  /** Route by prompt text instead of ids for this share of requests. */
  promptShare?: number;
  /** Give instances random model sets and requests random models. */
  models?: boolean;
  /** Compare a dry run (explain(request)) before this share of routes. */
  dryShare?: number;
  /** The routers' maxSessions (default theirs): small values make pins and ring entries overflow. */
  maxSessions?: number;
  /**
   * Push per-instance costs (learned costs: a fleet default, instances' own, cleared now and then)
   * and returning-session tokens, at random, as a CostLearner and a SessionReturns would.
   */
  costs?: boolean;
}

/** Costs around the H20 preset's, 0.3× to 3×, as a learner would push; now and then extreme. */
function randomCosts(rng: Rng): RoutingCosts {
  const spread = (): number => (rng.chance(0.05) ? rng.pick([1e-6, 1e6]) : 0.3 + rng.next() * 2.7);
  return {
    prefillSecondsPerToken: 4.5e-5 * spread(),
    prefillOverheadSeconds: rng.chance(0.1) ? 0 : 0.035 * spread(),
    // Omitted: the policy's batchWeight (what a steering CostLearner pushes).
    ...(rng.chance(0.3) ? {} : { interference: rng.chance(0.1) ? 0 : 0.2 * spread() }),
  };
}

const MODELS = ['llama', 'qwen', 'qwen:lora-a', 'qwen:lora-b'];
/** Every outcome of the offload layer but `off`, sorted. */
const ALL_OUTCOMES = ['below_threshold', 'colocate', 'no_prefill_instance', 'not_decoding', 'offload'];
/** A random model set: any model (a wildcard), none, or one to three of MODELS. */
function randomModels(rng: Rng): string[] | undefined {
  if (rng.chance(0.25)) return undefined;
  if (rng.chance(0.1)) return [];
  return Array.from({ length: rng.int(1, 3) }, () => rng.pick(MODELS));
}

/** Both routers' outcome of one call: its value, or the code and message it threw. */
function outcome<T>(fn: () => T): { value: T } | { code: unknown; message: string } {
  try {
    return { value: fn() };
  } catch (error) {
    return { code: (error as { code?: unknown }).code, message: (error as Error).message };
  }
}

const BASE_TRACE: TraceOptions = {
  seed: 1,
  requests: 3000,
  concurrentSessions: 24,
  firstTurnBlocks: [10, 120],
  appendBlocks: [1, 25],
  turnsPerSession: [1, 30],
  sharedPrefixes: 3,
  sharedPrefixBlocks: 6,
  branchProbability: 0.05,
};

interface ScenarioResult {
  decisions: number;
  reasons: Set<string>;
  hits: number;
  /** Offload outcomes seen (none without the layer), and prefill tickets opened. */
  offloads: Set<string>;
  prefillTickets: number;
}

function runScenario(sc: Scenario): ScenarioResult {
  const trace = generateTrace({ ...BASE_TRACE, ...sc.trace, seed: sc.seed });
  const rng = new Rng(sc.seed * 7919);
  const { native, reference } = twins({
    instances: sc.models
      ? Array.from({ length: sc.instances }, (_, k) => ({ id: `engine-${k}`, models: randomModels(rng) }))
      : sc.instances,
    policy: sc.policy,
    capacityBlocks: sc.capacityBlocks,
    clock: 'manual',
    ...(sc.maxSessions === undefined ? {} : { maxSessions: sc.maxSessions }),
  });
  const both = <T>(fn: (r: Router) => T) => [fn(native), fn(reference)] as const;
  let now = 1_000_000;
  both((r) => r.setTime(now));
  const inFlight: Array<{ ticket: number; decoding: boolean }> = [];
  const past: TraceRequest[] = [];
  const reasons = new Set<string>();
  const offloads = new Set<string>();
  let prefillTickets = 0;
  let extra = 0;
  let hits = 0;
  let routed = 0;
  // A session mostly keeps its model; a model nobody declares, or none, now and then.
  const sessionModel = new Map<string, string | undefined>();
  const modelOf = (session: string): string | undefined => {
    if (!sessionModel.has(session)) sessionModel.set(session, rng.chance(0.15) ? undefined : rng.pick(MODELS));
    if (rng.chance(0.05)) return 'never-declared';
    return rng.chance(0.1) ? rng.pick([undefined, ...MODELS]) : sessionModel.get(session);
  };

  for (let step = 0; step < trace.length; step += 1) {
    const req = trace[step]!;
    const model = sc.models ? modelOf(req.session) : undefined;
    const request: RouteRequest = {
      hashIds: req.ids,
      session: rng.chance(0.1) ? undefined : req.session,
      inputTokens: rng.chance(0.2) ? undefined : req.inputTokens,
      model,
      blockTokens: sc.models && rng.chance(0.1) ? rng.int(1, 64) : undefined,
    };
    const toRoute: RouteRequest =
      sc.promptShare !== undefined && rng.chance(sc.promptShare)
        ? {
            prompt: `${req.session}:`.padEnd(40, '.') + 'x'.repeat(req.ids.length * 8),
            session: request.session,
            model,
          }
        : request;
    if (rng.chance(sc.dryShare ?? (sc.models ? 0.05 : 0))) {
      const [dryN, dryR] = both((r) => r.explain(toRoute));
      expect(dryN).toEqual(dryR);
    }
    const [resultN, resultR] = both((r) => outcome(() => r.route(toRoute)));
    expect(resultN).toEqual(resultR);
    if (!('value' in resultN)) {
      // No candidate serves the model: refused alike, naming it.
      expect(resultN).toMatchObject({ code: 'ERR_KVROUTE_NO_INSTANCE' });
      expect(resultN.message).toContain(JSON.stringify(model));
      expect(sc.models).toBe(true);
      continue;
    }
    routed += 1;
    const ticketN = resultN.value;
    const [explainN, explainR] = both((r) => r.explain());
    expect(explainN).toEqual(explainR);
    reasons.add(explainN.reason!);
    if (explainN.candidates.find((c) => c.instance === explainN.instance)!.matchedBlocks > 0) hits += 1;
    inFlight.push({ ticket: ticketN as number, decoding: false });
    if (explainN.offload !== null) offloads.add(explainN.offload.outcome);
    // The prefill phase's ticket lives like any other: first token, complete or abort, in any order.
    const prefillTicket = explainN.offload?.prefillTicket ?? null;
    if (prefillTicket !== null) {
      expect(native.decision.offload.prefillTicket).toBe(prefillTicket);
      inFlight.push({ ticket: prefillTicket, decoding: false });
      prefillTickets += 1;
    }
    past.push(req);

    // Load events: first tokens, completions and aborts, keeping 4..40 in flight.
    const target = rng.int(4, 40);
    while (inFlight.length > target) {
      const k = rng.int(0, inFlight.length - 1);
      const { ticket } = inFlight[k]!;
      inFlight.splice(k, 1);
      const aborted = rng.chance(0.1);
      both((r) => (aborted ? r.abort(ticket) : r.complete(ticket)));
    }
    for (const f of inFlight) {
      if (!f.decoding && rng.chance(0.3)) {
        f.decoding = true;
        both((r) => r.onFirstToken(f.ticket));
      }
    }

    if (rng.chance(0.05)) {
      now += rng.int(1, 1500);
      both((r) => r.setTime(now));
    }
    const ids = native.instances();
    if (rng.chance(0.04)) {
      const target = rng.pick(ids);
      const state = {
        timestampMs: now - rng.int(0, 3000),
        running: rng.int(0, 12),
        waiting: rng.chance(0.3) ? undefined : rng.int(0, 6),
        kvBlocksUsed: rng.int(0, sc.capacityBlocks),
        kvBlocksTotal: sc.capacityBlocks,
        pendingPrefillTokens: rng.int(0, 20000),
        decodeBatch: rng.int(0, 10),
      };
      both((r) => r.setObservedState(target, state));
    }
    if (rng.chance(0.005) && past.length > 0) {
      const victim = rng.pick(past);
      const cut = rng.int(0, victim.ids.length);
      const instance = rng.pick(ids);
      const slice = victim.ids.slice(cut, cut + rng.int(1, 5));
      const [removedN, removedR] = both((r) => r.removeBlocks(instance, slice));
      expect(removedN).toBe(removedR);
    }
    if (rng.chance(0.003)) {
      const instance = rng.pick(ids);
      const capacity = rng.int(Math.ceil(sc.capacityBlocks / 4), sc.capacityBlocks * 2);
      const [evictedN, evictedR] = both((r) => r.setCapacity(instance, capacity));
      expect(evictedN).toBe(evictedR);
    }
    const routable = native.stats().instances.filter((s) => !s.drained).length;
    if (rng.chance(0.003) && routable > 2) {
      const instance = rng.pick(ids);
      both((r) => r.drainInstance(instance));
    }
    // With models, drains leave groups without candidates sooner: resume more often.
    if (rng.chance(sc.models ? 0.005 : 0.002)) {
      const instance = rng.pick(ids);
      both((r) => r.resumeInstance(instance));
    }
    if (rng.chance(0.002) && ids.length > 2) {
      const instance = rng.pick(ids);
      both((r) => r.removeInstance(instance));
    }
    if (rng.chance(0.004)) {
      const name = `extra-${extra++}`;
      const capacity = rng.int(Math.ceil(sc.capacityBlocks / 2), sc.capacityBlocks * 2);
      const models = sc.models ? randomModels(rng) : undefined;
      both((r) => r.addInstance(name, { capacityBlocks: capacity, models }));
    }
    if (sc.models && rng.chance(0.01)) {
      const instance = rng.pick(native.instances());
      const models = randomModels(rng);
      both((r) => r.setInstanceModels(instance, models));
      expect(native.models()).toEqual(reference.models());
    }
    if (sc.costs === true) {
      const ids = native.instances();
      if (step === 0 || rng.chance(0.01)) {
        const costs = rng.chance(0.1) ? null : randomCosts(rng);
        both((r) => r.setDefaultCosts(costs));
      }
      if (rng.chance(0.05)) {
        const instance = rng.pick(ids);
        const costs = rng.chance(0.2) ? null : randomCosts(rng);
        both((r) => r.setInstanceCosts(instance, costs));
        expect(native.instanceCosts(instance)).toEqual(reference.instanceCosts(instance));
      }
      if (rng.chance(0.05)) {
        const instance = rng.pick(ids);
        const tokens = rng.chance(0.3) ? 0 : rng.int(0, 50_000) * (rng.chance(0.1) ? 1000 : 1);
        both((r) => r.setReturningTokens(instance, tokens));
      }
    }
    if (step % 250 === 0) {
      expect(comparableStats(native)).toEqual(comparableStats(reference));
      expect(native.checkInvariants()).toBe('');
      expect(reference.checkInvariants()).toBe('');
    }
  }
  expect(comparableStats(native)).toEqual(comparableStats(reference));
  expect(native.checkInvariants()).toBe('');
  // The eviction pressure was real: several caches are (nearly) full.
  const full = native.stats().instances.filter((s) => s.blocks >= 0.9 * s.capacityBlocks);
  expect(full.length).toBeGreaterThanOrEqual(3);
  return { decisions: routed, reasons, hits, offloads, prefillTickets };
}

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
