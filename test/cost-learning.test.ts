/**
 * The learned per-instance costs (src/core/cost-learning/): the estimator converges on known
 * true coefficients under noise, holds its prior without observations, resists outliers (a
 * stalled engine, aborts), refuses bad inputs naming the field, and re-converges after the truth
 * changes. Then the CostLearner on a real Router: what it records per ticket.
 */
import { describe, expect, it } from 'vitest';

import {
  CostLearner,
  DEFAULT_COST_PRIOR,
  InstanceCostEstimator,
  predictTtftSeconds,
  type CostCoefficients,
} from '../src/core/cost-learning/index.js';
import { Router } from '../src/index.js';
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS } from '../src/sim/engine-preset.js';
import { decodeTimeCounters, decodeTimeSample } from '../src/state/decode-time-samples.js';
import { parseExposition } from '../src/state/engine-metrics-scrape.js';
import { Rng } from './helpers/random.js';
import { IMPLEMENTATIONS, thrown } from './helpers/routers.js';

/** A seeded uniform [0, 1) (mulberry32, test/helpers/random.ts). */
function random(seed: number): () => number {
  const rng = new Rng(seed);
  return () => rng.next();
}

/** Lognormal noise of about `sigma` relative spread. */
function noisy(rand: () => number, sigma: number): number {
  const gauss = Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());
  return Math.exp(sigma * gauss);
}

const scaled = (factor: number, interference = 0.05): CostCoefficients => ({
  ...DEFAULT_COST_PRIOR,
  prefillSecondsPerToken: DEFAULT_COST_PRIOR.prefillSecondsPerToken * factor,
  prefillOverheadSeconds: DEFAULT_COST_PRIOR.prefillOverheadSeconds * factor,
  interference,
});

/** Feeds `count` first tokens drawn against `truth`, with 10% lognormal noise. */
function feed(estimator: InstanceCostEstimator, truth: CostCoefficients, count: number, seed: number): void {
  const rand = random(seed);
  for (let i = 0; i < count; i += 1) {
    const pendingPrefillTokens = rand() < 0.5 ? 0 : Math.floor(rand() * 30_000);
    const ownTokens = 200 + Math.floor(rand() * 20_000);
    const requests = Math.floor(rand() * 10);
    const ttftSeconds = predictTtftSeconds(truth, pendingPrefillTokens + ownTokens, requests) * noisy(rand, 0.1);
    estimator.observeTtft({ ttftSeconds, pendingPrefillTokens, ownTokens, requests });
  }
}

const relativeError = (got: number, want: number): number => Math.abs(got / want - 1);

describe('InstanceCostEstimator', () => {
  it('with no observations, the estimate is the prior, and the prior is the H20 preset', () => {
    const e = new InstanceCostEstimator().estimate();
    expect(e).toMatchObject({ ...DEFAULT_COST_PRIOR, ttftObservations: 0, decodeObservations: 0 });
    expect(e.prefillTokensPerSecond).toBeCloseTo(1 / DEFAULT_COST_PRIOR.prefillSecondsPerToken, 6);
    const preset = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
    expect(DEFAULT_COST_PRIOR.prefillSecondsPerToken / (preset.prefillMsPerToken / 1000)).toBeCloseTo(1, 12);
    expect(DEFAULT_COST_PRIOR.prefillOverheadSeconds / (preset.stepOverheadMs / 1000)).toBeCloseTo(1, 12);
    expect(DEFAULT_COST_PRIOR.decodeStepSeconds / (preset.decodeBaseMs / 1000)).toBeCloseTo(1, 12);
    expect(DEFAULT_COST_PRIOR.decodeSecondsPerSequence / (preset.decodeMsPerSeq / 1000)).toBeCloseTo(1, 12);
  });

  it.each([
    ['a 2× faster instance', 0.5],
    ['a 0.7× prefill instance', 0.7],
    ['the preset itself', 1],
  ])('learns %s within 10% after 200 requests', (_, factor) => {
    const truth = scaled(factor);
    const estimator = new InstanceCostEstimator();
    feed(estimator, truth, 200, 7);
    const got = estimator.estimate();
    expect(relativeError(got.prefillSecondsPerToken, truth.prefillSecondsPerToken)).toBeLessThan(0.1);
    expect(got.ttftObservations).toBe(200);
  });

  it('learns a 3× slower instance (far from its prior) within 10% after 300 requests', () => {
    const truth = scaled(3);
    const estimator = new InstanceCostEstimator();
    feed(estimator, truth, 300, 8);
    expect(relativeError(estimator.estimate().prefillSecondsPerToken, truth.prefillSecondsPerToken)).toBeLessThan(0.1);
  });

  it('predicts a TTFT without making the estimate, as predictTtftSeconds(estimate()) does', () => {
    const rand = random(21);
    for (const factor of [0.5, 1, 3]) {
      const estimator = new InstanceCostEstimator();
      feed(estimator, scaled(factor, rand() * 0.5), 50, 9);
      for (let i = 0; i < 20; i++) {
        const work = Math.floor(rand() * 20_000);
        const requests = Math.floor(rand() * 8);
        const expected = predictTtftSeconds(estimator.estimate(), work, requests);
        expect(estimator.predictedTtftSeconds(work, requests)).toBeCloseTo(expected, 12);
      }
    }
  });

  it('learns the interference of requests on the instance', () => {
    const truth = scaled(1, 0.5);
    const estimator = new InstanceCostEstimator();
    feed(estimator, truth, 400, 11);
    expect(estimator.estimate().interference).toBeGreaterThan(0.35);
    expect(estimator.estimate().interference).toBeLessThan(0.65);
  });

  it('learns the decode step time and its growth with the batch', () => {
    const estimator = new InstanceCostEstimator();
    const rand = random(3);
    const truth = { base: 0.012, perSequence: 0.0008 };
    for (let i = 0; i < 300; i += 1) {
      const batch = 1 + Math.floor(rand() * 64);
      const secondsPerToken = (truth.base + truth.perSequence * batch) * noisy(rand, 0.05);
      estimator.observeDecode({ secondsPerToken, batch });
    }
    const got = estimator.estimate();
    expect(relativeError(got.decodeStepSeconds, truth.base)).toBeLessThan(0.1);
    expect(relativeError(got.decodeSecondsPerSequence, truth.perSequence)).toBeLessThan(0.1);
  });

  it("a stalled engine's huge TTFTs move the estimate by at most 10%, and it recovers", () => {
    const truth = scaled(0.7);
    const estimator = new InstanceCostEstimator();
    feed(estimator, truth, 200, 5);
    const before = estimator.estimate().prefillSecondsPerToken;
    // A stall: 20 first tokens in a row take 50× their prediction.
    for (let i = 0; i < 20; i += 1)
      estimator.observeTtft({
        ttftSeconds: 50 * predictTtftSeconds(truth, 8000, 2),
        pendingPrefillTokens: 0,
        ownTokens: 8000,
        requests: 2,
      });
    const stalled = estimator.estimate();
    expect(relativeError(stalled.prefillSecondsPerToken, before)).toBeLessThan(0.1);
    expect(stalled.reopened).toBe(0);
    expect(stalled.clippedObservations).toBeGreaterThanOrEqual(20);
    feed(estimator, truth, 150, 6);
    expect(relativeError(estimator.estimate().prefillSecondsPerToken, truth.prefillSecondsPerToken)).toBeLessThan(0.1);
  });

  it('re-converges after the truth changes (forgetting)', () => {
    const estimator = new InstanceCostEstimator();
    feed(estimator, scaled(1), 300, 1);
    const slower = scaled(2.5);
    feed(estimator, slower, 300, 2);
    expect(estimator.estimate().reopened).toBeGreaterThan(0);
    expect(relativeError(estimator.estimate().prefillSecondsPerToken, slower.prefillSecondsPerToken)).toBeLessThan(0.1);
  });

  it('keeps every estimate within the clamp range of the prior, however wild the data', () => {
    const estimator = new InstanceCostEstimator();
    feed(estimator, scaled(1000), 500, 9);
    const got = estimator.estimate();
    expect(got.prefillSecondsPerToken).toBeLessThanOrEqual(
      10 * DEFAULT_COST_PRIOR.prefillSecondsPerToken * (1 + 1e-12),
    );
    expect(got.interference).toBeGreaterThanOrEqual(0);
    expect(got.interference).toBeLessThanOrEqual(2 + 1e-12);
  });

  it.each([
    ['ttftSeconds', { ttftSeconds: NaN }],
    ['ttftSeconds', { ttftSeconds: 0 }],
    ['ttftSeconds', { ttftSeconds: -1 }],
    ['pendingPrefillTokens', { pendingPrefillTokens: -5 }],
    ['ownTokens', { ownTokens: Infinity }],
    ['requests', { requests: NaN }],
  ])('refuses a bad %s, naming it, and changes nothing', (field, bad) => {
    const estimator = new InstanceCostEstimator();
    const good = { ttftSeconds: 1, pendingPrefillTokens: 0, ownTokens: 1000, requests: 1 };
    const error = thrown(() => estimator.observeTtft({ ...good, ...bad }));
    expect(error).toMatchObject({ name: 'RangeError', code: 'ERR_KVROUTE_INVALID_ARG_VALUE' });
    expect((error as Error).message).toMatch(new RegExp(`^${field} must be`));
    expect(estimator.estimate()).toMatchObject({ ...DEFAULT_COST_PRIOR, ttftObservations: 0 });
  });

  it.each([
    ['secondsPerToken', { secondsPerToken: 0, batch: 1 }],
    ['secondsPerToken', { secondsPerToken: Infinity, batch: 1 }],
    ['batch', { secondsPerToken: 0.01, batch: 0 }],
    ['batch', { secondsPerToken: 0.01, batch: NaN }],
  ])('refuses a bad decode %s', (field, bad) => {
    const error = thrown(() => new InstanceCostEstimator().observeDecode(bad));
    expect((error as Error).message).toMatch(new RegExp(`^${field} must be`));
  });

  it('refuses a bad prior, naming the coefficient', () => {
    const error = thrown(() => new InstanceCostEstimator({ ...DEFAULT_COST_PRIOR, prefillSecondsPerToken: 0 }));
    expect((error as Error).message).toMatch(/^prior\.prefillSecondsPerToken must be/);
  });
});

describe.each(IMPLEMENTATIONS)('CostLearner on a Router ($impl)', ({ native }) => {
  const make = () => {
    const router = new Router({ instances: ['a', 'b'], native, clock: 'manual', policy: 'min_ttft' });
    let now = 0;
    const learner = new CostLearner(router, { now: () => now });
    return { router, learner, at: (ms: number) => (now = ms) };
  };

  it('reads the dispatch facts from the decision, and learns only from completed tickets', () => {
    const { router, learner, at } = make();
    const first = router.route({ hashIds: [1, 2, 3, 4], inputTokens: 64, session: 's' });
    learner.routed(first);
    expect(router.decision.predictedUncachedTokens).toBe(64);
    expect(router.decision.requestsAhead).toBe(0);
    const instance = router.decision.instance;
    // A second request on the same instance sees the first ahead of it.
    const second = router.route({ hashIds: [1, 2, 3, 4, 5], inputTokens: 80, session: 's' });
    learner.routed(second);
    expect(router.decision.instance).toBe(instance);
    expect(router.decision.requestsAhead).toBe(1);
    expect(router.decision.pendingPrefillTokens).toBe(64);
    expect(router.decision.predictedUncachedTokens).toBe(16);
    expect(learner.openTickets).toBe(2);
    at(50);
    learner.firstToken(first);
    router.onFirstToken(first);
    learner.aborted(second);
    router.abort(second);
    expect(learner.estimate(instance).ttftObservations).toBe(0);
    at(250);
    learner.completed(first, { outputTokens: 11 });
    router.complete(first);
    const got = learner.estimate(instance);
    expect(got.ttftObservations).toBe(1);
    expect(got.decodeObservations).toBe(1);
    expect(learner.openTickets).toBe(0);
    expect(Object.keys(learner.estimates())).toEqual(['a', 'b']);
    // Unknown and repeated tickets are no-ops.
    learner.completed(first);
    learner.firstToken(12345);
    expect(learner.estimate(instance).ttftObservations).toBe(1);
  });

  it("a retry's failed attempt is never an observation; the retry's is", () => {
    const { router, learner, at } = make();
    const failed = router.route({ hashIds: [1, 2], inputTokens: 32 });
    learner.routed(failed);
    const first = router.decision.instance;
    at(10);
    learner.firstToken(failed); // a first token, then the upstream failed mid-stream
    learner.aborted(failed);
    router.abort(failed);
    const retry = router.route({ hashIds: [1, 2], inputTokens: 32 });
    learner.routed(retry);
    const second = router.decision.instance;
    at(60);
    learner.firstToken(retry);
    learner.completed(retry);
    const observed = (id: string) => learner.estimate(id).ttftObservations;
    expect(observed(second)).toBe(1);
    if (first !== second) expect(observed(first)).toBe(0);
  });

  it('skips a first token at the route instant (a coarse clock) without throwing', () => {
    const { router, learner } = make();
    const ticket = router.route({ hashIds: [1] });
    learner.routed(ticket);
    learner.firstToken(ticket);
    learner.completed(ticket);
    expect(learner.skipped).toBe(1);
    expect(learner.estimate(router.decision.instance).ttftObservations).toBe(0);
  });

  it('remembers at most maxOpen tickets, forgetting the oldest', () => {
    const router = new Router({ instances: ['a', 'b'], native, clock: 'manual' });
    let now = 0;
    const learner = new CostLearner(router, { now: () => now, maxOpen: 2 });
    const tickets = [1, 2, 3].map((id) => {
      const ticket = router.route({ hashIds: [id] });
      learner.routed(ticket);
      return ticket;
    });
    expect(learner.openTickets).toBe(2);
    now = 100;
    for (const ticket of tickets) {
      learner.firstToken(ticket);
      learner.completed(ticket);
    }
    const total = Object.values(learner.estimates()).reduce((sum, e) => sum + e.ttftObservations, 0);
    expect(total).toBe(2);
  });

  it('refuses routed() of a ticket that is not the last route()', () => {
    const { router, learner } = make();
    const ticket = router.route({ hashIds: [1] });
    router.route({ hashIds: [2] });
    expect(thrown(() => learner.routed(ticket))).toMatchObject({ code: 'ERR_KVROUTE_UNKNOWN_TICKET' });
  });

  it('steers: prices with the estimates that fit, and an instance its model does not fit with the fleet default', () => {
    const router = new Router({ instances: ['fast', 'noisy'], native, clock: 'manual', policy: 'min_ttft' });
    let now = 0;
    const learner = new CostLearner(router, { now: () => now, steer: true });
    const prior = {
      prefillSecondsPerToken: DEFAULT_COST_PRIOR.prefillSecondsPerToken,
      prefillOverheadSeconds: DEFAULT_COST_PRIOR.prefillOverheadSeconds,
    };
    // Before any observation the fit is loose (residual scale 0.3): every instance at the prior.
    expect(router.instanceCosts('fast')).toEqual({ costs: prior, source: 'default' });
    const truth = { fast: scaled(0.5, 0.2), noisy: scaled(1, 0.2) };
    const rand = random(3);
    let observed = 0;
    for (let i = 0; observed < 600 && i < 5000; i += 1) {
      // One request at a time on an idle instance, nothing cached: W = own, n = 0.
      const inputTokens = 200 + Math.floor(rand() * 8_000);
      const ticket = router.route({ hashIds: [i], inputTokens });
      const instance = router.decision.instance as 'fast' | 'noisy';
      learner.routed(ticket, now);
      const own = inputTokens * (1 + router.policy.attentionWeight * (inputTokens / 2));
      const noise = instance === 'noisy' ? noisy(rand, 0.8) : noisy(rand, 0.05);
      now += predictTtftSeconds(truth[instance], own, 0) * noise * 1000;
      router.onFirstToken(ticket);
      learner.firstToken(ticket, now);
      router.complete(ticket);
      learner.completed(ticket, { atMs: now + 1 });
      now += 10;
      observed += 1;
    }
    expect(learner.estimate('fast').ttftObservations).toBeGreaterThan(200);
    expect(learner.estimate('noisy').ttftObservations).toBeGreaterThan(50);
    // The only instance whose model fits is the fleet's median: it is the default, and prices both.
    const fast = router.instanceCosts('fast');
    expect(fast.source).toBe('default');
    expect(relativeError(fast.costs!.prefillSecondsPerToken, truth.fast.prefillSecondsPerToken)).toBeLessThan(0.1);
    expect(fast.costs!.interference).toBeUndefined(); // min_ttft keeps the policy's batchWeight
    const noisyEstimate = learner.estimate('noisy');
    expect(noisyEstimate.ttftResidualScale).toBeGreaterThan(0.1);
    expect(router.instanceCosts('noisy')).toEqual(fast);
    expect(router.instanceCosts('noisy').costs!.prefillSecondsPerToken).not.toBe(noisyEstimate.prefillSecondsPerToken);
    expect(thrown(() => new CostLearner(router, { steerMaxResidual: -1 })).message).toMatch(
      /^steerMaxResidual must be/,
    );
  });

  it('prices instances within fleetBand of the median alike, and a 2× faster one with its own costs', () => {
    // round_robin, so every instance is observed alike; the prices pushed are the same under any policy.
    const router = new Router({ instances: ['a', 'b', 'c', 'fast'], native, clock: 'manual', policy: 'round_robin' });
    let now = 0;
    const learner = new CostLearner(router, { now: () => now, steer: true });
    const truth: Record<string, CostCoefficients> = { a: scaled(1), b: scaled(1), c: scaled(1), fast: scaled(0.5) };
    const rand = random(11);
    for (let i = 0; i < 2000; i += 1) {
      const inputTokens = 200 + Math.floor(rand() * 8_000);
      const ticket = router.route({ hashIds: [i], inputTokens });
      const instance = router.decision.instance;
      learner.routed(ticket, now);
      const own = inputTokens * (1 + router.policy.attentionWeight * (inputTokens / 2));
      now += predictTtftSeconds(truth[instance]!, own, 0) * noisy(rand, 0.05) * 1000;
      router.onFirstToken(ticket);
      learner.firstToken(ticket, now);
      router.complete(ticket);
      learner.completed(ticket, { atMs: now + 1 });
      now += 10;
    }
    // Each uniform instance's own estimate differs a little; the router prices all three alike.
    const own = ['a', 'b', 'c'].map((id) => learner.estimate(id).prefillSecondsPerToken);
    expect(new Set(own).size).toBe(3);
    const priced = ['a', 'b', 'c'].map((id) => router.instanceCosts(id));
    expect(priced[0]!.source).toBe('default');
    expect(priced[1]).toEqual(priced[0]);
    expect(priced[2]).toEqual(priced[0]);
    // The median instance's, as last pushed: it moves the default only past 1%.
    for (const estimate of own)
      expect(relativeError(priced[0]!.costs!.prefillSecondsPerToken, estimate)).toBeLessThan(0.03);
    expect(router.instanceCosts('fast').source).toBe('instance');
    const fast = router.instanceCosts('fast').costs!;
    expect(relativeError(fast.prefillSecondsPerToken, truth.fast!.prefillSecondsPerToken)).toBeLessThan(0.1);
    expect(thrown(() => new CostLearner(router, { fleetBand: -0.1 })).message).toMatch(/^fleetBand must be/);
  });

  it('refuses bad options, naming them', () => {
    const router = new Router({ instances: 1, native });
    expect((thrown(() => new CostLearner(router, { forgetting: 1.5 })) as Error).message).toMatch(
      /^forgetting must be/,
    );
    expect((thrown(() => new CostLearner(router, { clampRatio: 1 })) as Error).message).toMatch(/^clampRatio must be/);
    expect((thrown(() => new CostLearner(router, { maxOpen: 0 })) as Error).message).toMatch(/^maxOpen must be/);
    expect((thrown(() => new CostLearner(router, { persistence: 0.5 })) as Error).message).toMatch(
      /^persistence must be/,
    );
    expect(
      (thrown(() => new CostLearner(router, { priors: { x: { ...DEFAULT_COST_PRIOR, interference: -1 } } })) as Error)
        .message,
    ).toMatch(/^priors\.x\.interference must be/);
  });
});

describe('decode time from /metrics histogram deltas', () => {
  const scrape = (sum: number, count: number, running: number, name = 'vllm:inter_token_latency_seconds') =>
    decodeTimeCounters(
      parseExposition(
        [
          `# TYPE ${name} histogram`,
          `${name}_sum{model_name="m",engine="0"} ${sum}`,
          `${name}_count{model_name="m",engine="0"} ${count}`,
          `vllm:num_requests_running{model_name="m",engine="0"} ${running}`,
        ].join('\n'),
      ),
    );

  it('gives the mean seconds per token over the interval, at the mean running count', () => {
    expect(decodeTimeSample(scrape(10, 1000, 4), scrape(22, 2000, 8))).toEqual({ secondsPerToken: 0.012, batch: 6 });
    const older = 'vllm:time_per_output_token_seconds';
    expect(decodeTimeSample(scrape(0, 0, 0, older), scrape(1, 100, 0, older))).toEqual({
      secondsPerToken: 0.01,
      batch: 1,
    });
  });

  it('gives nothing for a reset, an idle interval or an engine without the histogram', () => {
    expect(decodeTimeSample(scrape(22, 2000, 8), scrape(1, 100, 8))).toBeUndefined();
    expect(decodeTimeSample(scrape(22, 2000, 8), scrape(22, 2000, 8))).toBeUndefined();
    const none = decodeTimeCounters(parseExposition('vllm:num_requests_running 3'));
    expect(decodeTimeSample(none, none)).toBeUndefined();
  });

  it('feeds a CostLearner', () => {
    const router = new Router({ instances: ['a'], native: false });
    const learner = new CostLearner(router);
    const sample = decodeTimeSample(scrape(10, 1000, 4), scrape(22, 2000, 8))!;
    learner.observeDecode('a', sample.secondsPerToken, sample.batch);
    expect(learner.estimate('a').decodeObservations).toBe(1);
    expect(thrown(() => learner.observeDecode('b', 0.01, 1))).toMatchObject({ code: 'ERR_KVROUTE_UNKNOWN_INSTANCE' });
    expect((thrown(() => learner.observeDecode('a', NaN, 1)) as Error).message).toMatch(/^secondsPerToken must be/);
  });
});
