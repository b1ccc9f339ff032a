/**
 * The proxy's learned costs (`serve --costs`, src/proxy/proxy-costs.ts): the proxy learns each
 * instance's prefill speed from its own requests in front of a two-class simulated fleet (the
 * fast class's gauge about 2× the slow one's); `fixed` pushes nothing into the router; a bad
 * value is refused naming its source; aborted, failed, retried and refused attempts are never
 * observations.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { DEFAULT_COST_PRIOR, type InstanceCostEstimate } from '../src/core/cost-learning/index.js';
import { Router } from '../src/core/router.js';
import type { Explanation } from '../src/core/types.js';
import { resolveServeConfig } from '../src/cli/serve-config.js';
import { adminMount } from '../src/proxy/observe/admin-api.js';
import { createProxyMetrics, type ProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import { ProxyCosts } from '../src/proxy/proxy-costs.js';
import { resolveProxyOptions } from '../src/proxy/proxy-options.js';
import { parseFleet } from '../src/sim/fleet-spec.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { parseExposition } from '../src/state/engine-metrics-scrape.js';
import { MODEL, post, startProxy, startStub, type ProxyRig, type StubUpstream } from './helpers/proxy-harness.js';
import { Rng } from './helpers/random.js';

const BLOCK = 16;

interface CostsBody {
  costs: string;
  instances: Record<string, { learned: InstanceCostEstimate; inForce: { source: string } }>;
}
const TOKEN = 'test-admin-token-costs-77';

/** One completion over `blocks` fresh blocks (nothing cached), read to its end. */
async function complete(base: string, id: number, blocks: number, stream: boolean): Promise<Response> {
  const response = await post(base, '/v1/completions', {
    model: MODEL,
    prompt: `request ${id}`,
    hash_ids: Array.from({ length: blocks }, (_, i) => id * 100_000 + i),
    input_tokens: blocks * BLOCK,
    max_tokens: 3,
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });
  await response.text();
  return response;
}

/** `name{instance=…}` of a /metrics text, by instance. */
function gauge(text: string, name: string, kind?: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const s of parseExposition(text))
    if (s.name === name && (kind === undefined || s.labels.kind === kind)) out.set(s.labels.instance!, s.value);
  return out;
}

describe('serve --costs learned, in front of a two-class fleet', () => {
  let fleet: SimFleet;
  let rig: ProxyRig;
  let metrics: ProxyMetrics;
  beforeAll(async () => {
    // Two preset engines, then two whose prefill costs half: twice as fast. At speed 2 a request's
    // prefill (1,600 to 7,000 tokens) takes tens to hundreds of ms, so the engines' time, not a
    // loaded machine's scheduling jitter, dominates each first token.
    fleet = await startSimFleet({ fleet: parseFleet('2,2:prefill=0.5'), port: 0, speed: 2 });
    metrics = createProxyMetrics({ defaultMetrics: false });
    // round_robin: every instance gets its share of observations whatever it learns.
    rig = await startProxy({
      backends: fleet.urls,
      policy: 'round_robin',
      costs: 'learned',
      // The engines run 2× faster than the preset: a prior near them (estimates stay within 10× of it).
      costPriorScale: 0.5,
      blockSize: BLOCK,
      observers: [metrics.observer],
      mounts: [metrics.mount, adminMount(TOKEN)],
    });
  }, 30_000);
  afterAll(async () => {
    await rig?.close();
    await fleet?.close();
  });

  /** What min_ttft prices `url` with, per token: the instance's own estimate or the fleet default. */
  const pricedSecondsPerToken = (url: string): number =>
    rig.proxy.router.instanceCosts(url).costs!.prefillSecondsPerToken;

  it('learns the fast instances at about twice the slow ones’ prefill speed', async () => {
    const rng = new Rng(28);
    for (let id = 1; id <= 120; id++) await complete(rig.base, id, rng.int(100, 440), id % 2 === 0);
    const text = await (await fetch(`${rig.base}/metrics`)).text();
    const speed = gauge(text, 'kvroute_instance_prefill_tokens_per_second');
    const observations = gauge(text, 'kvroute_instance_cost_observations', 'ttft');
    const [slowA, slowB, fastA, fastB] = fleet.urls.map((url) => speed.get(url)!);
    // Round robin gives each instance 30; an answer is an observation only when it completed whole.
    for (const url of fleet.urls) expect(observations.get(url)).toBeGreaterThanOrEqual(25);
    const ratio = (fastA! + fastB!) / (slowA! + slowB!);
    // The truth is 2; wall-clock first tokens on a loaded machine carry jitter the robust fit mostly removes.
    expect(ratio).toBeGreaterThan(1.4);
    expect(ratio).toBeLessThan(2.8);
    for (const name of [
      'kvroute_instance_prefill_overhead_seconds',
      'kvroute_instance_interference',
      'kvroute_instance_decode_step_seconds',
      'kvroute_instance_decode_seconds_per_sequence',
    ])
      expect(gauge(text, name).size).toBe(4);
    // Completed answers with ≥ 2 output tokens are decode samples too.
    for (const url of fleet.urls)
      expect(gauge(text, 'kvroute_instance_cost_observations', 'decode').get(url)).toBeGreaterThan(0);
    // The router prices every instance with learned seconds (explain's terms are what it priced),
    // the slow ones never cheaper. Whether an instance steers with its own estimate or the fleet
    // default depends on how well its model fits this run's timings; that choice is
    // test/cost-learning.test.ts's, on a deterministic clock. Here: the proxy pushed what it learned.
    const terms = new Map(
      rig.proxy.router.explain({ hashIds: [1, 2, 3] }).candidates.map((c) => [c.instance, c.terms!]),
    );
    for (const url of fleet.urls) {
      expect(terms.get(url)!.prefillSecondsPerToken).toBeCloseTo(pricedSecondsPerToken(url), 15);
      expect(['instance', 'default']).toContain(rig.proxy.router.instanceCosts(url).source);
    }
    const slowest = Math.min(pricedSecondsPerToken(fleet.urls[0]!), pricedSecondsPerToken(fleet.urls[1]!));
    const fastest = Math.max(pricedSecondsPerToken(fleet.urls[2]!), pricedSecondsPerToken(fleet.urls[3]!));
    expect(slowest).toBeGreaterThanOrEqual(fastest);
  }, 60_000);

  it('lists the learned costs in the admin API, and what prices each instance', async () => {
    const headers = { authorization: `Bearer ${TOKEN}` };
    const costs = (await (await fetch(`${rig.base}/admin/costs`, { headers })).json()) as CostsBody;
    expect(costs.costs).toBe('learned');
    for (const url of fleet.urls) {
      const { learned, inForce } = costs.instances[url]!;
      expect(learned.ttftObservations).toBeGreaterThan(0);
      // The admin API shows exactly the router's costs in force: the instance's own are its learned ones.
      expect(inForce.source).toBe(rig.proxy.router.instanceCosts(url).source);
      if (inForce.source === 'instance')
        expect(pricedSecondsPerToken(url)).toBeCloseTo(learned.prefillSecondsPerToken, 15);
    }
    const { instances } = (await (await fetch(`${rig.base}/admin/instances`, { headers })).json()) as {
      instances: Array<{ costs: InstanceCostEstimate }>;
    };
    expect(instances[0]!.costs.prefillTokensPerSecond).toBeGreaterThan(0);
    const explained = (await (
      await fetch(`${rig.base}/admin/explain`, {
        method: 'POST',
        headers: { ...headers, 'content-type': 'application/json' },
        body: JSON.stringify({ request: { hashIds: [1, 2, 3] } }),
      })
    ).json()) as { explanation: Explanation };
    expect(explained.explanation.candidates[0]!.terms!.prefillSecondsPerToken).toBeLessThan(1);
    // The last decision (a dry run above replaced it in the router: one more request first).
    await complete(rig.base, 999, 8, false);
    const last = (await (await fetch(`${rig.base}/admin/explain`, { headers })).json()) as { explanation: Explanation };
    expect(last.explanation.candidates).toHaveLength(4);
    const bad = await fetch(`${rig.base}/admin/explain`, {
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'no request field' }),
    });
    expect(bad.status).toBe(400);
  });
});

describe('serve --costs fixed', () => {
  it('watches without pushing: the router keeps token-equivalents (prefillSecondsPerToken 1)', async () => {
    const fleet = await startSimFleet({ instances: 2, port: 0, speed: 50 });
    const metrics = createProxyMetrics({ defaultMetrics: false });
    const rig = await startProxy({
      backends: fleet.urls,
      costs: 'fixed',
      blockSize: BLOCK,
      observers: [metrics.observer],
      mounts: [metrics.mount],
    });
    try {
      for (let id = 1; id <= 8; id++) await complete(rig.base, id, 64, id % 2 === 0);
      for (const candidate of rig.proxy.router.explain({ hashIds: [1, 2, 3] }).candidates) {
        expect(candidate.terms!.prefillSecondsPerToken).toBe(1);
        expect(candidate.terms!.prefillOverheadSeconds).toBe(0);
      }
      for (const url of fleet.urls) expect(rig.proxy.router.instanceCosts(url).source).toBe('none');
      // The learner still watched: the gauges are there, with observations.
      const text = await (await fetch(`${rig.base}/metrics`)).text();
      const observed = [...gauge(text, 'kvroute_instance_cost_observations', 'ttft').values()];
      expect(observed.reduce((a, b) => a + b, 0)).toBe(8);
    } finally {
      await rig.close();
      await fleet.close();
    }
  }, 30_000);
});

describe('a bad --costs', () => {
  it('is refused naming its source', () => {
    expect(() => resolveServeConfig({ costs: 'fast' }, {})).toThrow(/^--costs must be learned or fixed, got "fast"/);
    expect(() => resolveServeConfig({}, { KVROUTE_COSTS: 'cheap' })).toThrow(/^KVROUTE_COSTS must be learned or fixed/);
    expect(resolveServeConfig({ costs: 'fixed' }, {}).proxy.costs).toBe('fixed');
    expect(resolveServeConfig({}, {}).proxy.costs).toBeUndefined();
    expect(() => resolveProxyOptions({ backends: ['http://127.0.0.1:1'], costs: 'x' as 'fixed' })).toThrow(
      /options\.costs must be 'learned' or 'fixed', got x/,
    );
    expect(resolveProxyOptions({ backends: ['http://127.0.0.1:1'] }).costs).toBe('learned');
  });

  it('and a bad --cost-prior-scale too; a good one scales the prior', () => {
    for (const bad of ['0', '-1', '101', 'fast', ''])
      expect(() => resolveServeConfig({ 'cost-prior-scale': bad }, {})).toThrow(
        /^--cost-prior-scale must be a number in \(0, 100\]/,
      );
    expect(resolveServeConfig({ 'cost-prior-scale': '0.2' }, {}).proxy.costPriorScale).toBe(0.2);
    expect(() => resolveProxyOptions({ backends: ['http://127.0.0.1:1'], costPriorScale: 0 })).toThrow(
      /options\.costPriorScale must be a number in \(0, 100\], got 0/,
    );
    const router = new Router({ instances: ['a'] });
    const half = new ProxyCosts(router, { costs: 'learned', costPriorScale: 0.5 }).estimates().a!;
    expect(half.prefillTokensPerSecond).toBeCloseTo(2 / DEFAULT_COST_PRIOR.prefillSecondsPerToken, 6);
    expect(half.decodeStepSeconds).toBeCloseTo(DEFAULT_COST_PRIOR.decodeStepSeconds / 2, 12);
    expect(router.instanceCosts('a').costs!.prefillSecondsPerToken).toBeCloseTo(
      DEFAULT_COST_PRIOR.prefillSecondsPerToken / 2,
      12,
    );
  });

  it.skipIf(!existsSync('dist/cli.js'))('exits 2 from the command line', () => {
    const run = spawnSync(process.execPath, ['dist/cli.js', 'serve', '--costs', 'fast'], { encoding: 'utf8' });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/--costs must be learned or fixed/);
  });
});

describe('what is not an observation', () => {
  const ANSWER = JSON.stringify({
    id: 'x',
    object: 'text_completion',
    choices: [{ index: 0, text: 'ok', finish_reason: 'stop' }],
    usage: { prompt_tokens: 16, completion_tokens: 2, total_tokens: 18 },
  });
  let good: StubUpstream;
  let refusing: StubUpstream;
  let stalled: StubUpstream;
  let reset: StubUpstream;
  let stalledArrived: () => void = () => {};
  beforeAll(async () => {
    // Resets the connection before any byte: the attempt fails and is retried elsewhere.
    reset = await startStub((req) => req.socket.destroy());
    good = await startStub((_req, res) => {
      setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(ANSWER), 5);
    });
    refusing = await startStub((_req, res) => res.writeHead(500, { 'content-type': 'application/json' }).end('{}'));
    // Sends its head and never a body byte: the client gives up.
    stalled = await startStub((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders();
      stalledArrived();
    });
  });
  afterAll(async () => {
    await Promise.all([good, refusing, stalled, reset].map((s) => s?.close()));
  });

  const observations = (rig: ProxyRig, id: string): number =>
    rig.proxy.state.costs.estimates()[id]?.ttftObservations ?? -1;

  it('a retry’s failed attempt is not; its successful attempt is', async () => {
    const rig = await startProxy({ backends: [reset.url, good.url], policy: 'round_robin', retries: 2 });
    try {
      await rig.proxy.state.start();
      for (let id = 1; id <= 4; id++) expect((await complete(rig.base, id, 4, false)).status).toBe(200);
      expect(reset.requests.length).toBeGreaterThan(0);
      expect(rig.observer.named('retry').length).toBe(reset.requests.length);
      expect(observations(rig, reset.url)).toBe(0);
      expect(observations(rig, good.url)).toBe(4);
      expect(rig.proxy.state.costs.estimates()[good.url]!.decodeObservations).toBe(4);
    } finally {
      await rig.close();
    }
  });

  it('an engine’s error answer is not', async () => {
    const rig = await startProxy({ backends: [refusing.url] });
    try {
      await rig.proxy.state.start();
      for (let id = 1; id <= 3; id++) expect((await complete(rig.base, id, 4, false)).status).toBe(500);
      expect(observations(rig, refusing.url)).toBe(0);
    } finally {
      await rig.close();
    }
  });

  it('an aborted request is not', async () => {
    const rig = await startProxy({ backends: [stalled.url] });
    try {
      await rig.proxy.state.start();
      const arrived = new Promise<void>((resolve) => (stalledArrived = resolve));
      const abort = new AbortController();
      const pending = fetch(`${rig.base}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: 2, stream: true }),
        signal: abort.signal,
      }).catch(() => undefined);
      await arrived;
      abort.abort();
      await pending;
      await rig.observer.until(() => rig.observer.named('finished').length === 1, 5_000, 'the abort');
      expect(rig.observer.named('finished')[0]![5]).toBe('client_abort');
      expect(observations(rig, stalled.url)).toBe(0);
      expect(rig.proxy.state.costs.estimates()[stalled.url]!.decodeObservations).toBe(0);
    } finally {
      await rig.close();
    }
  });
});

describe('serve counts sessions between turns (docs/policies.md "Sessions between turns")', () => {
  /** Two turns of `session` (the second extends the first), each read to its end. */
  async function twoTurns(base: string, session: string): Promise<void> {
    for (const blocks of [40, 60]) {
      const body = {
        model: MODEL,
        prompt: 'x',
        hash_ids: Array.from({ length: blocks }, (_, i) => i + 1000 * session.length),
        input_tokens: blocks * BLOCK,
        max_tokens: 2,
      };
      await (await post(base, '/v1/completions', body, { 'x-session-id': session })).text();
    }
  }
  const returning = (rig: ProxyRig) =>
    rig.proxy.router.explain({ hashIds: [1] }).candidates.reduce((sum, c) => sum + c.terms!.returningTokens, 0);

  it('an idle session counts its next turn on its instance; --session-returns off counts none', async () => {
    const fleet = await startSimFleet({ instances: 2, port: 0, speed: 20 });
    try {
      const on = await startProxy({ backends: fleet.urls, blockSize: BLOCK });
      try {
        await twoTurns(on.base, 'agent-1');
        // Its later turn added 20 blocks: 320 tokens expected back on its instance.
        expect(returning(on)).toBe(320);
      } finally {
        await on.close();
      }
      const off = await startProxy({ backends: fleet.urls, blockSize: BLOCK, sessionReturns: false });
      try {
        await twoTurns(off.base, 'agent-2');
        expect(returning(off)).toBe(0);
      } finally {
        await off.close();
      }
    } finally {
      await fleet.close();
    }
    expect(resolveServeConfig({ 'session-returns': 'off' }, {}).proxy.sessionReturns).toBe(false);
    expect(resolveServeConfig({}, {}).proxy.sessionReturns).toBeUndefined();
    expect(() => resolveServeConfig({ 'session-returns': 'maybe' }, {})).toThrow(/--session-returns/);
    expect(() => resolveProxyOptions({ backends: ['http://127.0.0.1:1'], sessionReturns: 1 as never })).toThrow(
      /options\.sessionReturns must be true or false, got 1/,
    );
  }, 30_000);
});
