/**
 * The offload layer's decision (docs/policies.md "The offload layer") on hand-worked cases at
 * every boundary, for the addon and the TypeScript reference alike. Every expected cost below is
 * worked by hand from src/core/offload-cost.ts's formulas and DEFAULT_OFFLOAD_COST:
 *
 *   prefillMs(n, c) = ceil(n / 8192) × 35 + 0.04518 × n + 5.48e-6 × n × (c + n / 2)
 *   wireMs(n)       = n × 98,304 B × 8 / 25 Gbps = n × 0.031457… ms
 *   transferMs(n)   = wireMs(n) + 35 (+ 140 on a cold pair)
 *
 *   n = 2048, c = 0:    prefill 35 + 92.529 + 11.492 = 139.02; wire 64.42;
 *                       transfer 99.42 warm, 239.42 cold
 *   n = 8192, c = 0:    prefill 35 + 370.115 + 183.878 = 588.99; wire 257.70;
 *                       transfer 292.70 warm, 432.70 cold
 *   n = 1001, c = 0:    prefill 35 + 45.225 + 2.746 = 82.97; wire 31.49; transfer 206.49 cold
 *   n = 1024, c = 2048: prefill 35 + 46.264 + 14.366 = 95.63; wire 32.21;
 *                       transfer 67.21 warm, 207.21 cold
 *   n = 3072, c = 0:    prefill 35 + 138.793 + 25.858 = 199.65
 *
 * With chargePrefill, ownMs(P) = prefillMs(P's uncached, P's cached) + prefillMs(P's pending, 0)
 * and extraPrefillMs = ownMs(P) − prefillMs(n, c) on the target.
 *
 * Fleets are shaped with observed state (decodeBatch, running, waiting) so the base policy's
 * target and every other instance's load are exactly what each case needs.
 */
import { describe, expect, it } from 'vitest';

import { Router, type ObservedState, type PolicyName, type PolicySpec, type RouteRequest } from '../src/index.js';
import { IMPLEMENTATIONS, thrown } from './helpers/routers.js';

const NOW = 10_000;

describe.each(IMPLEMENTATIONS)('the offload layer ($impl)', ({ native }) => {
  /** A router on the manual clock whose instances report `states` (fresh). */
  const fleet = (
    policy: PolicyName | PolicySpec,
    states: Record<string, ObservedState>,
    models: Record<string, string[]> = {},
  ): Router => {
    const router = new Router({
      instances: Object.keys(states).map((id) => ({ id, models: models[id] })),
      policy,
      clock: 'manual',
      native,
    });
    router.setTime(NOW);
    for (const [id, state] of Object.entries(states)) router.setObservedState(id, { timestampMs: NOW, ...state });
    return router;
  };
  /** T decodes one request; p1 and p2 hold 2 and 3 waiting requests and no decode: load_only picks T. */
  const decodingTarget = (decodeBatch = 1, policy: PolicyName | PolicySpec = 'load_only+offload') =>
    fleet(policy, {
      t: { running: decodeBatch, decodeBatch },
      p1: { waiting: 2 + decodeBatch },
      p2: { waiting: 3 + decodeBatch },
    });
  const prompt = (inputTokens: number): RouteRequest => ({ inputTokens });
  /** Completes both tickets of the last decision, so the fleet's shadow load is as before. */
  const finish = (router: Router, ticket: number) => {
    const prefill = router.decision.offload.prefillTicket;
    router.complete(ticket);
    if (prefill >= 0) router.complete(prefill);
  };

  it('a policy without the layer reports off, and explain() has no offload section', () => {
    const router = decodingTarget(1, 'load_only');
    router.route(prompt(8192));
    expect(router.decision.offload).toMatchObject({ outcome: 'off', prefillIndex: -1, prefillTicket: -1 });
    expect(router.explain().offload).toBeNull();
    expect(router.policy.offload).toBeNull();
  });

  it('a target that is not decoding keeps its prefill, however long', () => {
    const router = fleet('load_only+offload', { t: { waiting: 0 }, p1: { waiting: 3 }, p2: { waiting: 4 } });
    router.route(prompt(100_000));
    expect(router.decision.instance).toBe('t');
    expect(router.decision.offload).toMatchObject({ outcome: 'not_decoding', interferenceMs: 0, transferMs: 0 });
  });

  it('exactly the threshold stays below it; one token more weighs the costs', () => {
    const router = decodingTarget(3);
    let ticket = router.route(prompt(1000));
    expect(router.decision.offload.outcome).toBe('below_threshold');
    router.complete(ticket);
    ticket = router.route(prompt(1001));
    // 3 decodes × 82.97 = 248.91 ms lost > 206.49 ms to move 1,001 tokens over a cold pair.
    const o = router.decision.offload;
    expect(o.outcome).toBe('offload');
    expect(o.interferenceMs).toBeCloseTo(248.912, 2);
    expect(o.transferMs).toBeCloseTo(206.489, 2);
    expect(o.coldPair).toBe(true);
    finish(router, ticket);
    // A threshold of its own: 1,001 tokens are now at it.
    router.setPolicy({ name: 'load_only+offload', offload: { thresholdTokens: 1001 } });
    router.route(prompt(1001));
    expect(router.decision.offload.outcome).toBe('below_threshold');
  });

  it('offload wins: the decode stays on the target, the prefill goes to the least-loaded decode-free instance', () => {
    const router = decodingTarget(1);
    const ids = Float64Array.from({ length: 512 }, (_, k) => 7000 + k); // 512 × 16 = 8,192 tokens
    const ticket = router.route({ hashIds: ids });
    const d = router.decision;
    expect(d.instance).toBe('t');
    expect(d.reason).toBe('least_loaded');
    // 1 decode × 588.99 ms > 432.70 ms (8,192 tokens over a cold pair).
    expect(d.offload.outcome).toBe('offload');
    expect(d.offload.prefillInstance).toBe('p1');
    expect(d.offload.prefillIndex).toBe(1);
    expect(d.offload.interferenceMs).toBeCloseTo(588.993, 2);
    expect(d.offload.transferMs).toBeCloseTo(432.698, 2);
    expect(d.offload.coldPair).toBe(true);
    const prefill = d.offload.prefillTicket;
    expect(prefill).toBeGreaterThanOrEqual(0);
    expect(prefill).not.toBe(ticket);
    // Read in place, yet a spread or JSON sees plain values.
    expect({ ...d.offload }).toEqual({
      outcome: 'offload',
      prefillInstance: 'p1',
      prefillIndex: 1,
      prefillTicket: prefill,
      interferenceMs: expect.closeTo(588.993, 2),
      transferMs: expect.closeTo(432.698, 2),
      extraPrefillMs: 0,
      coldPair: true,
    });
    expect(JSON.parse(JSON.stringify(d.offload))).toMatchObject({ outcome: 'offload', prefillIndex: 1 });
    // The target counts the request but no prefill (its KV arrives by transfer); P carries the prefill.
    const shadow = () => Object.fromEntries(router.stats().instances.map((s) => [s.instance, s.shadow]));
    expect(shadow()).toEqual({
      t: { running: 0, waiting: 1, prefillTokens: 0, activeBlocks: 512 },
      p1: { running: 0, waiting: 1, prefillTokens: 8192, activeBlocks: 512 },
      p2: { running: 0, waiting: 0, prefillTokens: 0, activeBlocks: 0 },
    });
    // The blocks are in both belief indexes.
    expect(router.match({ hashIds: ids })).toEqual({ t: 512, p1: 512, p2: 0 });
    expect(router.explain()).toMatchObject({
      instance: 't',
      ticket,
      offload: {
        outcome: 'offload',
        prefillInstance: 'p1',
        prefillTicket: prefill,
        coldPair: true,
        thresholdTokens: 1000,
      },
    });
    // Only the base reason is counted, once.
    expect(router.stats().decisions.least_loaded).toBe(1);
    expect(router.stats().instances.map((s) => s.routed)).toEqual([1, 1, 0]);
  });

  it('the prefill ticket lives like any ticket: first token, complete, abort, refused twice', () => {
    const router = decodingTarget(1);
    const decode = router.route(prompt(8192));
    const prefill = router.decision.offload.prefillTicket;
    const p1 = () => router.stats().instances.find((s) => s.instance === 'p1')!;
    router.onFirstToken(prefill);
    expect(p1().shadow).toEqual({ running: 1, waiting: 0, prefillTokens: 0, activeBlocks: 0 });
    router.complete(prefill);
    expect(p1().shadow).toEqual({ running: 0, waiting: 0, prefillTokens: 0, activeBlocks: 0 });
    expect(p1().completed).toBe(1);
    expect(thrown(() => router.complete(prefill))).toMatchObject({ code: 'ERR_KVROUTE_UNKNOWN_TICKET' });
    router.onFirstToken(decode);
    router.complete(decode);
    // A failed prefill phase is aborted; the decode's ticket is the caller's to close too.
    const view = router.decision.offload;
    const again = router.route(prompt(8192));
    expect(router.decision.offload).toBe(view); // one view, reused: nothing allocated per route
    const failed = router.decision.offload.prefillTicket;
    router.abort(failed);
    expect(p1().aborted).toBe(1);
    expect(p1().shadow.prefillTokens).toBe(0);
    router.abort(again);
    expect(router.stats().inFlight).toBe(0);
    expect(router.checkInvariants()).toBe('');
  });

  it('a cold pair keeps a 2,048-token prefill at home; once the pair is warm it is offloaded', () => {
    const router = decodingTarget(1);
    let ticket = router.route(prompt(2048));
    // 139.02 ms lost ≤ 99.42 + 140 = 239.42 ms over the never-used pair (p1, t).
    expect(router.decision.offload).toMatchObject({ outcome: 'colocate', coldPair: true, prefillTicket: -1 });
    expect(router.decision.offload.interferenceMs).toBeCloseTo(139.021, 2);
    expect(router.decision.offload.transferMs).toBeCloseTo(239.425, 2);
    router.complete(ticket);
    // 8,192 tokens pay even cold (588.99 > 432.70): the pair (p1, t) carries an offload.
    ticket = router.route(prompt(8192));
    expect(router.decision.offload).toMatchObject({ outcome: 'offload', prefillInstance: 'p1', coldPair: true });
    finish(router, ticket);
    // The same 2,048 tokens again: 139.02 ms > 99.42 ms over the warm pair.
    ticket = router.route(prompt(2048));
    expect(router.decision.offload).toMatchObject({ outcome: 'offload', prefillInstance: 'p1', coldPair: false });
    expect(router.decision.offload.transferMs).toBeCloseTo(99.425, 2);
    finish(router, ticket);
    // Removing the prefill instance forgets its pairs: a new instance in its slot starts cold.
    router.removeInstance('p1');
    router.addInstance('p1b');
    router.setObservedState('p1b', { timestampMs: NOW, waiting: 3 });
    router.route(prompt(2048));
    expect(router.decision.offload).toMatchObject({ outcome: 'colocate', coldPair: true });
  });

  it('the transfer moves only what the target lacks, and the prefill instance queues what it lacks', () => {
    // unified+A+B+offload (v3): t holds 128 of the request's 192 blocks, so affinity picks it.
    const router = fleet('v3', { t: {}, p1: {}, p2: {} });
    const ids = Float64Array.from({ length: 192 }, (_, k) => 500 + k);
    for (const other of ['p1', 'p2']) router.drainInstance(other);
    router.complete(router.route({ hashIds: ids.subarray(0, 128) }));
    for (const other of ['p1', 'p2']) router.resumeInstance(other);
    // t decodes 2; p1 and p2 wait on 2 each, so the overload gate (2 ≤ 1.3 × 2) passes.
    router.setObservedState('t', { timestampMs: NOW, running: 2, decodeBatch: 2 });
    router.setObservedState('p1', { timestampMs: NOW, waiting: 2 });
    router.setObservedState('p2', { timestampMs: NOW, waiting: 2 });
    const request = { hashIds: ids, inputTokens: 3072 };
    router.route(request);
    // n = 3,072 − 2,048 cached = 1,024: 2 × 95.63 = 191.26 ms ≤ 207.21 ms (1,024 tokens, cold).
    expect(router.decision).toMatchObject({ instance: 't', reason: 'affinity' });
    expect(router.decision.offload).toMatchObject({ outcome: 'colocate', coldPair: true });
    expect(router.decision.offload.interferenceMs).toBeCloseTo(191.26, 2);
    expect(router.decision.offload.transferMs).toBeCloseTo(207.212, 2);
    // Three decodes: 286.89 ms > 207.21 ms. P ties on load and queue: the lower slot, p1, which
    // holds none of the prompt and so queues all 3,072 tokens.
    router.setObservedState('t', { timestampMs: NOW, running: 3, decodeBatch: 3 });
    router.setObservedState('p1', { timestampMs: NOW, waiting: 3 });
    router.setObservedState('p2', { timestampMs: NOW, waiting: 3 });
    // A new turn: the same 128 cached blocks, then 64 new ones (t's last dispatch holds the old 64).
    const next = Float64Array.from(ids, (id, k) => (k < 128 ? id : id + 10_000));
    router.route({ hashIds: next, inputTokens: 3072 });
    expect(router.decision.offload).toMatchObject({ outcome: 'offload', prefillInstance: 'p1' });
    const shadow = Object.fromEntries(router.stats().instances.map((s) => [s.instance, s.shadow.prefillTokens]));
    expect(shadow).toEqual({ t: 1024, p1: 3072, p2: 0 });
  });

  it('no decode-free instance: colocated, with the interference and a warm-priced transfer', () => {
    const router = fleet('load_only+offload', {
      t: { running: 1, decodeBatch: 1 },
      p1: { running: 2, decodeBatch: 2 },
      p2: { running: 3, decodeBatch: 3 },
    });
    router.route(prompt(8192));
    const o = router.decision.offload;
    expect(router.decision.instance).toBe('t');
    expect(o).toMatchObject({ outcome: 'no_prefill_instance', prefillIndex: -1, prefillTicket: -1, coldPair: false });
    expect(o.interferenceMs).toBeCloseTo(588.993, 2);
    expect(o.transferMs).toBeCloseTo(292.698, 2);
    expect(router.explain().offload).toMatchObject({ outcome: 'no_prefill_instance', prefillInstance: null });
  });

  describe('the prefill instance', () => {
    const pick = (router: Router, request: RouteRequest = prompt(8192)) => {
      router.route(request);
      expect(router.decision.offload.outcome).toBe('offload');
      expect(router.decision.offload.prefillInstance).not.toBe(router.decision.instance);
      return router.decision.offload.prefillInstance;
    };

    it('is the one with the fewest requests, then the least queued prefill, then the lowest index', () => {
      const states = (a: ObservedState, b: ObservedState, c: ObservedState) => ({
        t: { running: 1, decodeBatch: 1 },
        a: { timestampMs: NOW, ...a },
        b: { timestampMs: NOW, ...b },
        c: { timestampMs: NOW, ...c },
      });
      expect(pick(fleet('load_only+offload', states({ waiting: 4 }, { waiting: 3 }, { waiting: 5 })))).toBe('b');
      const queued = { waiting: 3 };
      expect(
        pick(
          fleet(
            'load_only+offload',
            states(
              { ...queued, pendingPrefillTokens: 900 },
              { ...queued, pendingPrefillTokens: 800 },
              { ...queued, pendingPrefillTokens: 700 },
            ),
          ),
        ),
      ).toBe('c');
      expect(pick(fleet('load_only+offload', states(queued, queued, queued)))).toBe('a');
    });

    it('skips instances that are decoding, however lightly loaded', () => {
      const router = fleet('load_only+offload', {
        t: { running: 1, decodeBatch: 1 },
        busy: { running: 1, decodeBatch: 1, waiting: 1 },
        idle: { waiting: 6 },
      });
      expect(pick(router)).toBe('idle');
    });

    it("is a candidate of the request's model, and never a drained instance", () => {
      const router = fleet(
        'load_only+offload',
        { t: { running: 1, decodeBatch: 1 }, llama: { waiting: 2 }, qwen: { waiting: 5 }, any: { waiting: 4 } },
        { t: ['qwen'], llama: ['llama'], qwen: ['qwen'] },
      );
      // Without a model the least loaded, llama, prefills; a qwen request never goes there.
      expect(pick(router)).toBe('llama');
      router.complete(router.decision.ticket);
      router.complete(router.decision.offload.prefillTicket);
      expect(pick(router, { ...prompt(8192), model: 'qwen' })).toBe('any');
      router.complete(router.decision.ticket);
      router.complete(router.decision.offload.prefillTicket);
      router.drainInstance('any');
      expect(pick(router, { ...prompt(8192), model: 'qwen' })).toBe('qwen');
    });
  });

  describe('chargePrefill', () => {
    const charged: PolicySpec = { name: 'load_only+offload', offload: { chargePrefill: true } };
    const ids = Float64Array.from({ length: 192 }, (_, k) => 500 + k); // 192 × 16 = 3,072 tokens
    /**
     * t (3 decodes) and `holders` hold the request's first 128 blocks (2,048 tokens); `waiting`
     * shapes every instance's load so load_only picks t.
     */
    const history = (
      policy: PolicyName | PolicySpec,
      holders: string[],
      waiting: Record<string, ObservedState>,
    ): Router => {
      const router = fleet(policy, { t: {}, ...Object.fromEntries(Object.keys(waiting).map((id) => [id, {}])) });
      for (const holder of ['t', ...holders]) {
        const others = ['t', ...Object.keys(waiting)].filter((id) => id !== holder);
        for (const other of others) router.drainInstance(other);
        router.complete(router.route({ hashIds: ids.subarray(0, 128) }));
        expect(router.decision.instance).toBe(holder);
        for (const other of others) router.resumeInstance(other);
      }
      router.setObservedState('t', { timestampMs: NOW, running: 3, decodeBatch: 3 });
      for (const [id, state] of Object.entries(waiting)) router.setObservedState(id, { timestampMs: NOW, ...state });
      return router;
    };
    const request = { hashIds: ids, inputTokens: 3072 };

    it('picks the decode-free instance holding the prefix over a less-loaded one that does not', () => {
      const waiting = { far: { waiting: 5 }, near: { waiting: 6 } };
      // Without it: the least loaded, far, which recomputes all 3,072 tokens.
      const plain = history('load_only+offload', ['near'], waiting);
      plain.route(request);
      expect(plain.decision.offload).toMatchObject({ outcome: 'offload', prefillInstance: 'far', extraPrefillMs: 0 });
      // With it: own prefill on far 199.65 ms; on near (2,048 cached) 95.63 ms, the target's own,
      // so extra = 0 and 3 × 95.63 = 286.89 ms > 207.21 ms (1,024 tokens, cold pair).
      const router = history(charged, ['near'], waiting);
      router.route(request);
      const o = router.decision.offload;
      expect(o).toMatchObject({ outcome: 'offload', prefillInstance: 'near', coldPair: true, extraPrefillMs: 0 });
      expect(o.interferenceMs).toBeCloseTo(286.889, 2);
      expect(o.transferMs).toBeCloseTo(207.212, 2);
      // near queues only what it lacks.
      const queued = Object.fromEntries(router.stats().instances.map((s) => [s.instance, s.shadow.prefillTokens]));
      expect(queued).toEqual({ t: 0, far: 0, near: 1024 });
      // P's queued prefill counts: 8,192 pending tokens on near cost 588.99 ms more, so far
      // (199.65 ms) prefills, 104.02 ms slower than t: 286.89 ≤ 207.21 + 104.02 = 311.23, colocated.
      const queuedNear = history(charged, ['near'], {
        far: { waiting: 5 },
        near: { waiting: 6, pendingPrefillTokens: 8192 },
      });
      queuedNear.route(request);
      expect(queuedNear.decision.offload.outcome).toBe('colocate');
      expect(queuedNear.decision.offload.extraPrefillMs).toBeCloseTo(104.021, 2);
    });

    it("charges P's recomputation of the history: an offload without it is colocated with it", () => {
      const waiting = { p1: { waiting: 5 }, p2: { waiting: 6 } };
      const plain = history('load_only+offload', [], waiting);
      plain.route(request);
      expect(plain.decision.offload).toMatchObject({ outcome: 'offload', prefillInstance: 'p1' });
      // p1 and p2 lack the 2,048 cached tokens: 199.65 − 95.63 = 104.02 ms extra on p1 (fewer
      // requests breaks the tie); 286.89 ms ≤ 207.21 + 104.02 = 311.23 ms.
      const router = history(charged, [], waiting);
      router.route(request);
      const o = router.decision.offload;
      expect(o).toMatchObject({ outcome: 'colocate', prefillIndex: -1, coldPair: true });
      expect(o.interferenceMs).toBeCloseTo(286.889, 2);
      expect(o.transferMs).toBeCloseTo(207.212, 2); // the transfer alone
      expect(o.extraPrefillMs).toBeCloseTo(104.021, 2);
      expect(router.explain().offload).toMatchObject({ outcome: 'colocate', extraPrefillMs: o.extraPrefillMs });
      expect(router.explain().reason).toBe('least_loaded');
      // A fourth decode: 4 × 95.63 = 382.52 ms > 311.23 ms, offloaded after all.
      const heavier = history(charged, [], waiting);
      heavier.setObservedState('t', { timestampMs: NOW, running: 4, decodeBatch: 4 });
      heavier.setObservedState('p1', { timestampMs: NOW, waiting: 6 });
      heavier.setObservedState('p2', { timestampMs: NOW, waiting: 7 });
      heavier.route(request);
      expect(heavier.decision.offload).toMatchObject({ outcome: 'offload', prefillInstance: 'p1' });
      expect(heavier.decision.offload.extraPrefillMs).toBeCloseTo(104.021, 2);
    });
  });

  it('a dry run decides and explains, and opens no ticket nor warms a pair', () => {
    const router = decodingTarget(1);
    const before = router.stats();
    const dry = router.explain(prompt(8192));
    expect(dry).toMatchObject({
      dryRun: true,
      instance: 't',
      ticket: null,
      offload: { outcome: 'offload', prefillInstance: 'p1', prefillTicket: null, coldPair: true },
    });
    expect(router.decision.offload.prefillTicket).toBe(-1);
    expect(router.stats()).toEqual(before);
    // Still cold: the dry run carried nothing.
    router.route(prompt(2048));
    expect(router.decision.offload).toMatchObject({ outcome: 'colocate', coldPair: true });
  });

  it('a spec with its own cost model: layer-wise transfer over a faster link', () => {
    // 8,192 tokens over 100 Gbps, layer-wise: 257.70 / 4 / 48 = 1.34 ms on the wire, + 35 warm + 140 cold.
    const router = decodingTarget(1, {
      name: 'load_only',
      offload: { linkGbps: 100, layerwise: true },
    });
    expect(router.policy.name).toBe('load_only+offload');
    router.route(prompt(8192));
    expect(router.decision.offload.transferMs).toBeCloseTo(176.342, 2);
  });
});

it('both cores compute the same costs to the last bit', () => {
  const routers = IMPLEMENTATIONS.map(({ native }) => {
    const router = new Router({ instances: ['t', 'p'], policy: 'load_only+offload', clock: 'manual', native });
    router.setTime(NOW);
    router.setObservedState('t', { timestampMs: NOW, running: 7, decodeBatch: 7 });
    router.setObservedState('p', { timestampMs: NOW, waiting: 9 });
    return router;
  });
  for (const tokens of [1001, 4097, 8191, 8193, 20_000, 123_457]) {
    const [a, b] = routers.map((r) => {
      r.explain({ inputTokens: tokens });
      return { ...r.explain({ inputTokens: tokens }).offload };
    });
    expect(a).toEqual(b);
  }
});
