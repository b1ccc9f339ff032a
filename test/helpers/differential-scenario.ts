/**
 * One randomized differential scenario (test/differential*.test.ts): the addon and the TypeScript
 * reference driven with the same generated multi-session trace and the same random side calls
 * (load events, observed state, clock moves, block removals, instances coming and going, models,
 * costs, peers' load and session pins), asserting after every call that they agree.
 */
import { expect } from 'vitest';

import type { PolicyName, PolicySpec, RouteRequest, Router, RoutingCosts } from '../../src/index.js';
import { Rng } from './random.js';
import { comparableStats, twins } from './routers.js';
import { generateTrace, type TraceOptions, type TraceRequest } from './trace-gen.js';

export interface Scenario {
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
  /**
   * Push other replicas' load per instance and pin sessions to random instances, as a replica
   * applying its peers' load plane would (docs/scale-out.md, "The load plane").
   */
  peers?: boolean;
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
export const ALL_OUTCOMES = ['below_threshold', 'colocate', 'no_prefill_instance', 'not_decoding', 'offload'];
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

export interface ScenarioResult {
  decisions: number;
  reasons: Set<string>;
  hits: number;
  /** Offload outcomes seen (none without the layer), and prefill tickets opened. */
  offloads: Set<string>;
  prefillTickets: number;
}

export function runScenario(sc: Scenario): ScenarioResult {
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
    if (sc.peers === true) {
      const ids = native.instances();
      if (rng.chance(0.1)) {
        const instance = rng.pick(ids);
        const load = rng.chance(0.15)
          ? null
          : {
              running: rng.int(0, 30),
              waiting: rng.chance(0.2) ? undefined : rng.int(0, 12),
              prefillTokens: rng.int(0, 60_000),
              activeBlocks: rng.int(0, sc.capacityBlocks),
            };
        both((r) => r.setPeerLoad(instance, load));
      }
      if (rng.chance(0.05)) {
        const session = rng.pick(past).session;
        const instance = rng.pick(ids);
        const model = sc.models ? modelOf(session) : undefined;
        const [pinnedN, pinnedR] = both((r) => outcome(() => r.pinSession(session, instance, model)));
        expect(pinnedN).toEqual(pinnedR);
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
