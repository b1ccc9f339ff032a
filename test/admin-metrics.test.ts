/**
 * The proxy's Prometheus /metrics and its admin API, through a live proxy in front of simulated
 * engines: the counters move with real requests, and the admin API refuses without the right
 * token (compared in constant time), adds/drains/removes backends and switches policy live.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { adminMount } from '../src/proxy/observe/admin-api.js';
import { createProxyMetrics, type ProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import { createProxy, type Proxy } from '../src/proxy/server/proxy-server.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { parseExposition, type MetricSample } from '../src/state/engine-metrics-scrape.js';
import { ShadowReconciler } from '../src/state/shadow-reconciler.js';

const TOKEN = 'test-admin-token-4f1c';
const MODEL = 'qwen3-coder-30b-a3b';

let fleet: SimFleet;
let proxy: Proxy;
let base: string;
let metrics: ProxyMetrics;

beforeAll(async () => {
  fleet = await startSimFleet({ instances: 2, port: 0, speed: 50 });
  metrics = createProxyMetrics();
  proxy = createProxy({
    backends: fleet.urls,
    observers: [metrics.observer],
    mounts: [metrics.mount, adminMount(TOKEN)],
    onWarning: () => {},
  });
  const { port } = await proxy.listen(0);
  base = `http://127.0.0.1:${port}`;
});

afterAll(async () => {
  await proxy?.close({ graceMs: 100 });
  await fleet?.close();
});

const chat = (content: string, session: string, stream = false) =>
  fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content }],
      max_tokens: 4,
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    }),
  });

const admin = (path: string, body?: unknown, token: string | null = TOKEN) =>
  fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: {
      ...(token === null ? {} : { authorization: `Bearer ${token}` }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });

/** What the admin API and error responses carry; the assertions check the shape. */
interface Body {
  error: { message: string };
  policy: { name: string; overloadFactor: number };
  backends: Array<{ id: string }>;
  router: { instances: unknown[] };
  instances: Array<Record<string, unknown>>;
  added: string;
}
const body = async (response: Response) => (await response.json()) as Body;

async function scrape(): Promise<MetricSample[]> {
  const response = await fetch(`${base}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
  return parseExposition(await response.text());
}

const total = (samples: MetricSample[], name: string, labels: Record<string, string> = {}) =>
  samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);

describe('GET /metrics', () => {
  it('counts requests, decisions, latencies and cached tokens from real traffic', async () => {
    const before = await scrape();
    const long = 'The same long agentic context, turn after turn. '.repeat(60);
    for (let turn = 0; turn < 3; turn++) {
      const response = await chat(long, 'metrics-session');
      expect(response.status).toBe(200);
      await response.json();
    }
    const streamed = await chat(long, 'metrics-session', true);
    expect(streamed.status).toBe(200);
    expect(await streamed.text()).toMatch(/data: \[DONE\]/);

    const after = await scrape();
    const delta = (name: string, labels?: Record<string, string>) =>
      total(after, name, labels) - total(before, name, labels);
    expect(delta('kvroute_requests_total', { status: '200', policy: 'min_ttft' })).toBe(4);
    expect(delta('kvroute_routing_decisions_total')).toBe(4);
    expect(delta('kvroute_routing_decision_microseconds_count', { policy: 'min_ttft' })).toBe(4);
    expect(delta('kvroute_time_to_first_token_seconds_count')).toBe(4);
    expect(delta('kvroute_e2e_request_latency_seconds_count')).toBe(4);
    expect(delta('kvroute_prompt_tokens_total')).toBeGreaterThan(4 * 100);
    // Turns 2-4 of one session land where turn 1 left its prefix: the engine reports cached tokens.
    expect(delta('kvroute_cached_tokens_total')).toBeGreaterThan(0);
    const ratios = after.filter((s) => s.name === 'kvroute_prefix_cache_hit_ratio');
    expect(ratios.some((s) => s.value > 0 && s.value <= 1)).toBe(true);
    for (const url of fleet.urls) {
      expect(total(after, 'kvroute_in_flight_requests', { instance: url })).toBe(0);
      expect(total(after, 'kvroute_backend_healthy', { instance: url })).toBe(1);
      const kv = after.find((m) => m.name === 'kvroute_kv_usage_ratio' && m.labels.instance === url);
      expect(kv!.value).toBeGreaterThanOrEqual(0);
      expect(kv!.value).toBeLessThanOrEqual(1);
    }
    expect(after.some((s) => s.name === 'process_cpu_user_seconds_total')).toBe(true);
  });

  it("exports each engine's own prefix-cache hit ratio from a reconcile round", async () => {
    const absent = (await scrape()).filter((s) => s.name === 'kvroute_engine_prefix_cache_hit_ratio');
    expect(absent).toEqual([]); // nothing before the first round
    // One long prompt three times in one session: the engine that serves it hits its cache.
    const prompt = 'Refactor the router so that every policy shares one scoring loop. '.repeat(40);
    for (let i = 0; i < 3; i++) {
      const response = await chat(prompt, 'engine-ratio-session');
      expect(response.status).toBe(200);
      await response.text();
    }
    const reconciler = new ShadowReconciler({ router: proxy.router, onRound: (r) => metrics.onReconcile(r) });
    const results = await reconciler.reconcileOnce();
    const ratios = (await scrape()).filter((s) => s.name === 'kvroute_engine_prefix_cache_hit_ratio');
    // Every engine that has answered a query (an idle one exports no ratio yet).
    const answered = results.filter((r) => r.prefixCacheHitRatio !== undefined).map((r) => r.instance);
    expect(answered.length).toBeGreaterThan(0);
    expect(ratios.map((s) => s.labels.instance).sort()).toEqual(answered.sort());
    for (const s of ratios) {
      expect(s.value).toBe(results.find((r) => r.instance === s.labels.instance)!.prefixCacheHitRatio);
      expect(s.value).toBeGreaterThanOrEqual(0);
      expect(s.value).toBeLessThanOrEqual(1);
    }
    expect(Math.max(...ratios.map((s) => s.value))).toBeGreaterThan(0.3); // two of three prompts hit
    // An instance the proxy does not have is not exported.
    metrics.onReconcile([{ instance: 'http://127.0.0.1:1', released: 0, prefixCacheHitRatio: 0.5 }]);
    expect((await scrape()).some((s) => s.labels.instance === 'http://127.0.0.1:1')).toBe(false);
  });

  it('counts a refused request under instance "none"', async () => {
    const before = total(await scrape(), 'kvroute_requests_total', { instance: 'none', status: '400' });
    const response = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: '{not json' });
    expect(response.status).toBe(400);
    await response.text();
    expect(total(await scrape(), 'kvroute_requests_total', { instance: 'none', status: '400' })).toBe(before + 1);
  });
});

describe('the admin API', () => {
  it('refuses without a bearer token or with a wrong one', async () => {
    const none = await admin('/admin/state', undefined, null);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await body(none)).error.message).toMatch(/Authorization: Bearer/);
    const wrong = await admin('/admin/state', undefined, `${TOKEN}x`);
    expect(wrong.status).toBe(401);
    expect((await body(wrong)).error.message).toMatch(/token is wrong/);
    const short = await admin('/admin/policy', { policy: 'sticky' }, 't');
    expect(short.status).toBe(401);
    await short.text();
    expect((await body(await admin('/admin/policy'))).policy.name).toBe('min_ttft'); // unchanged
  });

  it('shows the state and the instances', async () => {
    const state = await body(await admin('/admin/state'));
    expect(state.policy.name).toBe('min_ttft');
    expect(state.backends.map((b: { id: string }) => b.id)).toEqual(fleet.urls);
    expect(state.router.instances).toHaveLength(2);
    const { instances } = await body(await admin('/admin/instances'));
    expect(instances[0]).toMatchObject({ id: fleet.urls[0], healthy: true, drained: false, inFlight: 0 });
  });

  it('switches the policy live: the next request routes by it', async () => {
    const switched = await admin('/admin/policy', { policy: 'sticky' });
    expect(switched.status).toBe(200);
    expect((await body(switched)).policy.name).toBe('sticky');
    const response = await chat('hello', 'a-new-session-for-sticky');
    expect(response.headers.get('x-kvroute-reason')).toBe('new_session');
    await response.json();
    const unknown = await admin('/admin/policy', { policy: 'fastest' });
    expect(unknown.status).toBe(400);
    expect((await body(unknown)).error.message).toMatch(/fastest/);
    const back = await admin('/admin/policy', { policy: { name: 'unified+A+B' } });
    expect((await body(back)).policy).toMatchObject({ name: 'unified+A+B', overloadFactor: 1.3 });
    await admin('/admin/policy', { policy: 'min_ttft' });
  });

  it('drains, removes and adds backends; refuses unknown, duplicate and malformed ones', async () => {
    const [first, second] = fleet.urls as [string, string];
    const drained = await admin('/admin/instances/drain', { url: second });
    expect(drained.status).toBe(200);
    expect((await body(drained)).instances[1]).toMatchObject({ id: second, drained: true });
    for (let k = 0; k < 4; k++) {
      const response = await chat(`drain check ${k}`, `drain-${k}`);
      expect(response.headers.get('x-kvroute-instance')).toBe(first);
      await response.json();
    }
    expect((await admin('/admin/instances/remove', { url: second })).status).toBe(200);
    expect((await body(await admin('/admin/instances'))).instances).toHaveLength(1);
    const added = await admin('/admin/instances/add', { url: `${second}/` }); // normalised
    expect(added.status).toBe(201);
    expect((await body(added)).added).toBe(second);

    const duplicate = await admin('/admin/instances/add', { url: first });
    expect(duplicate.status).toBe(409);
    await duplicate.text();
    const unknown = await admin('/admin/instances/drain', { url: 'http://127.0.0.1:9' });
    expect(unknown.status).toBe(404);
    expect((await body(unknown)).error.message).toMatch(/is not known/);
    const malformed = await admin('/admin/instances/add', '{"url":');
    expect(malformed.status).toBe(400);
    expect((await body(malformed)).error.message).toMatch(/not valid JSON/);
    const missing = await admin('/admin/instances/add', { host: 'x' });
    expect(missing.status).toBe(400);
    expect((await body(missing)).error.message).toMatch(/field url/);
    const notUrl = await admin('/admin/instances/add', { url: 'ftp://example' });
    expect(notUrl.status).toBe(400);
    await notUrl.text();
  });
});

describe('the admin API without a token', () => {
  it('answers 403 on every admin route', async () => {
    const off = createProxy({ backends: fleet.urls, mounts: [adminMount(undefined)], onWarning: () => {} });
    const { port } = await off.listen(0);
    try {
      const response = await fetch(`http://127.0.0.1:${port}/admin/state`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(response.status).toBe(403);
      expect((await body(response)).error.message).toMatch(/--admin-token/);
    } finally {
      await off.close({ graceMs: 100 });
    }
  });
});
