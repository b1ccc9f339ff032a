/**
 * Flow control in the proxy (src/flow/, exchange/admission.ts; docs/flow-control.md), in front of
 * an engine that holds its answers until the test releases them: a flooding tenant does not delay
 * another's request in the queue, a higher class goes first, a client deadline ends in 429
 * queue_timeout, rate limits refuse with 429 rate_limited and a Retry-After, API keys become
 * hashed tenants, every bad header is a 400 naming it, the body's integer `priority` picks a class
 * when the header is absent (a non-integer one is a 400 naming it), `max_tokens` lowers a request's
 * fair-queueing cost, the admin API changes weights live and
 * refuses a bad config naming the key, and the metrics and access log carry tenant and class.
 */
import type { ServerResponse } from 'node:http';

import { afterEach, describe, expect, it } from 'vitest';

import { adminMount } from '../src/proxy/observe/admin-api.js';
import { createProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import { apiKeyTenant } from '../src/flow/flow-identity.js';
import { MODEL, post, startProxy, startStub, type ProxyRig, type StubUpstream } from './helpers/proxy-harness.js';
import { waitFor } from './helpers/wait-for.js';

const TOKEN = 'flow-admin-token-31';

interface Rig {
  rig: ProxyRig;
  upstream: StubUpstream;
  held: ServerResponse[];
  /** Answers the oldest held request. */
  answer(): void;
  /** The tag (`content`) of every request the engine received, in order. */
  seen(): string[];
}

let open: Rig | undefined;

async function holdingProxy(options: Record<string, unknown>): Promise<Rig> {
  const held: ServerResponse[] = [];
  const upstream = await startStub((_req, res) => void held.push(res));
  const metrics = createProxyMetrics({ defaultMetrics: false });
  const rig = await startProxy({
    backends: [upstream.url],
    ...options,
    observers: [metrics.observer, ...((options.observers as []) ?? [])],
    mounts: [metrics.mount, adminMount(TOKEN)],
  });
  open = {
    rig,
    upstream,
    held,
    answer: () =>
      held
        .shift()!
        .writeHead(200, { 'content-type': 'application/json' })
        .end('{"choices":[],"usage":{"completion_tokens":5}}'),
    seen: () =>
      upstream.requests.map(
        (r) => (JSON.parse(r.body.toString()) as { messages: Array<{ content: string }> }).messages[0]!.content,
      ),
  };
  return open;
}

afterEach(async () => {
  if (open === undefined) return;
  while (open.held.length > 0) open.answer();
  await open.rig.close();
  await open.upstream.close();
  open = undefined;
});

function send(
  base: string,
  tag: string,
  headers: Record<string, string> = {},
  fields: Record<string, unknown> = {},
): Promise<Response> {
  return post(
    base,
    '/v1/chat/completions',
    { model: MODEL, messages: [{ role: 'user', content: tag }], ...fields },
    headers,
  );
}

/** Answers held requests until the engine has seen `count`. */
async function drainUntil(r: Rig, count: number): Promise<void> {
  while (r.upstream.requests.length < count) {
    if (r.held.length > 0) r.answer();
    await new Promise((resolve) => setImmediate(resolve));
  }
}

describe('flow control in the proxy', () => {
  it('a flood from one tenant does not delay another tenant’s request in the queue', async () => {
    const r = await holdingProxy({ maxInFlight: 1, queueSize: 100 });
    const all: Array<Promise<Response>> = [send(r.rig.base, 'first', { 'x-kvroute-tenant': 'noisy' })];
    await waitFor('one request held upstream', () => r.held.length === 1);
    for (let i = 0; i < 20; i++) all.push(send(r.rig.base, `noisy ${i}`, { 'x-kvroute-tenant': 'noisy' }));
    await waitFor('20 queued', () => r.rig.proxy.state.admission.queued === 20);
    all.push(send(r.rig.base, 'quiet', { 'x-kvroute-tenant': 'quiet' }));
    await waitFor('21 queued', () => r.rig.proxy.state.admission.queued === 21);
    // Release one at a time: the quiet tenant's one request is among the next two, not the 22nd.
    for (let k = 2; k <= 3; k++) {
      r.answer();
      await waitFor(`the engine to see ${k}`, () => r.upstream.requests.length === k);
    }
    expect(r.seen().slice(1, 3)).toContain('quiet');
    while (r.upstream.requests.length < 22 || r.held.length > 0) {
      if (r.held.length > 0) r.answer();
      await new Promise((resolve) => setImmediate(resolve));
    }
    for (const response of await Promise.all(all)) expect(response.status).toBe(200);
    const scraped = await (await fetch(`${r.rig.base}/metrics`)).text();
    expect(scraped).toContain('kvroute_flow_requests_total{tenant="noisy",priority="normal",outcome="admitted"} 21');
    expect(scraped).toContain('kvroute_flow_requests_total{tenant="quiet",priority="normal",outcome="admitted"} 1');
    expect(scraped).toMatch(/kvroute_flow_queue_wait_seconds_count\{tenant="quiet",priority="normal"\} 1/);
  });

  it('serves the high class first; an unknown class is a 400 naming the header', async () => {
    const r = await holdingProxy({ maxInFlight: 1, queueSize: 10 });
    const all = [send(r.rig.base, 'first')];
    await waitFor('one request held upstream', () => r.held.length === 1);
    all.push(send(r.rig.base, 'low', { 'x-kvroute-priority': 'low' }));
    all.push(send(r.rig.base, 'normal'));
    await waitFor('2 queued', () => r.rig.proxy.state.admission.queued === 2);
    all.push(send(r.rig.base, 'high', { 'x-kvroute-priority': 'HIGH' }));
    await waitFor('3 queued', () => r.rig.proxy.state.admission.queued === 3);
    while (r.upstream.requests.length < 4) {
      if (r.held.length > 0) r.answer();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(r.seen()).toEqual(['first', 'high', 'normal', 'low']);
    while (r.held.length > 0) r.answer();
    await Promise.all(all);
    const bad = await send(r.rig.base, 'bad', { 'x-kvroute-priority': 'urgent' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      error: {
        type: 'invalid_request_error',
        code: 'invalid_field',
        param: 'x-kvroute-priority',
        message: 'x-kvroute-priority must be one of high, normal, low, got "urgent"',
      },
    });
  });

  it('takes the class from the body’s integer priority (lower first) when the header is absent', async () => {
    const r = await holdingProxy({ maxInFlight: 1, queueSize: 10 });
    const all = [send(r.rig.base, 'first')];
    await waitFor('one request held upstream', () => r.held.length === 1);
    const queue = async (tag: string, headers: Record<string, string>, fields: Record<string, unknown>, n: number) => {
      all.push(send(r.rig.base, tag, headers, fields));
      await waitFor(`${n} queued`, () => r.rig.proxy.state.admission.queued === n);
    };
    await queue('normal', {}, {}, 1);
    await queue('body 5', {}, { priority: 5 }, 2);
    await queue('header wins', { 'x-kvroute-priority': 'low' }, { priority: -1 }, 3);
    await queue('body -1', {}, { priority: -1 }, 4);
    await queue('body 0', {}, { priority: 0 }, 5);
    await drainUntil(r, 6);
    // -1 → high ahead of the queued normal ones; 0 → normal; 5 → low, and the header's low beats the body's -1.
    expect(r.seen()).toEqual(['first', 'body -1', 'normal', 'body 0', 'body 5', 'header wins']);
    // The body reaches the engine as sent: vLLM reads `priority` itself.
    const forwarded = r.upstream.requests.map((q) => (JSON.parse(q.body.toString()) as { priority?: number }).priority);
    expect(forwarded).toEqual([undefined, -1, undefined, 0, 5, -1]);
    while (r.held.length > 0) r.answer();
    for (const response of await Promise.all(all)) expect(response.status).toBe(200);
    const scraped = await (await fetch(`${r.rig.base}/metrics`)).text();
    expect(scraped).toContain('kvroute_flow_requests_total{tenant="default",priority="high",outcome="admitted"} 1');
    expect(scraped).toContain('kvroute_flow_requests_total{tenant="default",priority="low",outcome="admitted"} 2');
  });

  it('refuses a body priority that is not an integer with a 400 naming it, before it queues', async () => {
    const r = await holdingProxy({ maxInFlight: 1, queueSize: 10 });
    for (const [priority, shown] of [
      ['x', '"x"'],
      [1.5, '1.5'],
      [true, 'true'],
    ] as const) {
      const bad = await send(r.rig.base, 'bad', {}, { priority });
      expect(bad.status).toBe(400);
      expect(await bad.json()).toMatchObject({
        error: {
          type: 'invalid_request_error',
          code: 'invalid_field',
          param: 'priority',
          message: `priority must be an integer (lower is handled earlier), got ${shown}`,
        },
      });
    }
    expect(r.upstream.requests).toEqual([]);
  });

  it('charges a request its max_tokens rather than the expected output when lower: fair share shows it', async () => {
    const r = await holdingProxy({ maxInFlight: 1, queueSize: 100 });
    const all = [send(r.rig.base, 'first')];
    await waitFor('one request held upstream', () => r.held.length === 1);
    // Equal weights, equal prompts; `capped` asks for 1 output token, `open` for the default.
    for (let i = 0; i < 10; i++) all.push(send(r.rig.base, `open ${i}`, { 'x-kvroute-tenant': 'open' }));
    await waitFor('10 queued', () => r.rig.proxy.state.admission.queued === 10);
    for (let i = 0; i < 10; i++)
      all.push(send(r.rig.base, `capped ${i}`, { 'x-kvroute-tenant': 'capped' }, { max_tokens: 1 }));
    await waitFor('20 queued', () => r.rig.proxy.state.admission.queued === 20);
    await drainUntil(r, 12);
    // Each open request costs ~256 tokens, a capped one a few: after the open tenant's first, the
    // capped tenant's ten all fit in its share before the open tenant's second (equal costs alternate).
    const next11 = r.seen().slice(1, 12);
    expect(next11.filter((t) => t.startsWith('capped')).length).toBe(10);
    await drainUntil(r, 21);
    while (r.held.length > 0) r.answer();
    for (const response of await Promise.all(all)) expect(response.status).toBe(200);
  });

  it('a request past its deadline header gets 429 queue_timeout with Retry-After', async () => {
    const r = await holdingProxy({ maxInFlight: 1, queueSize: 10, queueTimeoutMs: 60_000 });
    const first = send(r.rig.base, 'first');
    await waitFor('one request held upstream', () => r.held.length === 1);
    const late = await send(r.rig.base, 'late', { 'x-kvroute-deadline-ms': '50' });
    expect(late.status).toBe(429);
    expect(late.headers.get('retry-after')).toBe('1');
    expect(await late.json()).toMatchObject({ error: { type: 'server_error', code: 'queue_timeout' } });
    const bad = await send(r.rig.base, 'bad', { 'x-kvroute-deadline-ms': 'soon' });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { param: string } }).error.param).toBe('x-kvroute-deadline-ms');
    r.answer();
    expect((await first).status).toBe(200);
    expect(r.seen()).toEqual(['first']);
  });

  it('refuses past a tenant’s requests per minute with 429 rate_limited and Retry-After; others pass', async () => {
    const r = await holdingProxy({
      flow: { tenants: { metered: { rpm: 2 }, tokens: { tpm: 1_000 } } },
    });
    const answered = async (response: Promise<Response>): Promise<Response> => {
      await waitFor('the request upstream', () => r.held.length > 0);
      r.answer();
      return response;
    };
    for (let i = 0; i < 2; i++)
      expect((await answered(send(r.rig.base, `m${i}`, { 'x-kvroute-tenant': 'metered' }))).status).toBe(200);
    const refused = await send(r.rig.base, 'm2', { 'x-kvroute-tenant': 'metered' });
    expect(refused.status).toBe(429);
    // 2 per minute: the next request is 30 s away.
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(29);
    expect(await refused.json()).toMatchObject({
      error: {
        type: 'server_error',
        code: 'rate_limited',
        message: expect.stringContaining('tenant metered is over its requests per minute limit'),
      },
    });
    // Another tenant is not affected.
    expect((await answered(send(r.rig.base, 'other', { 'x-kvroute-tenant': 'other' }))).status).toBe(200);
    const headers = { authorization: `Bearer ${TOKEN}` };
    const flow = (await (await fetch(`${r.rig.base}/admin/flow`, { headers })).json()) as {
      refused: { rate_limited: number };
      tenants: Record<string, { remaining: { requests?: number; tokens?: number } }>;
    };
    expect(flow.refused.rate_limited).toBe(1);
    expect(flow.tenants.metered!.remaining.requests).toBeLessThan(1);
  });

  it('sheds a class past its bound on the predicted TTFT with 503 shed and Retry-After; a higher class passes', async () => {
    const r = await holdingProxy({
      flow: {
        classes: [
          { name: 'high', shedAtMs: 3_600_000 },
          { name: 'normal', shedAtMs: 1 },
        ],
        shedding: { sloMs: 3_600_000 },
      },
    });
    const shed = await send(r.rig.base, 'normal');
    expect(shed.status).toBe(503);
    expect(Number(shed.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(await shed.json()).toMatchObject({
      error: { type: 'server_error', code: 'shed', message: expect.stringContaining('the fleet is overloaded') },
    });
    const high = send(r.rig.base, 'high', { 'x-kvroute-priority': 'high' });
    await waitFor('the high request upstream', () => r.held.length > 0);
    r.answer();
    expect((await high).status).toBe(200);
    expect(r.seen()).toEqual(['high']);
    const headers = { authorization: `Bearer ${TOKEN}` };
    const flow = (await (await fetch(`${r.rig.base}/admin/flow`, { headers })).json()) as {
      refused: { shed: number };
      shedding: { predictedTtftMs: number; boundsMs: Record<string, number> };
    };
    expect(flow.refused.shed).toBe(1);
    expect(flow.shedding.predictedTtftMs).toBeGreaterThan(1);
    expect(flow.shedding.boundsMs).toEqual({ high: 3_600_000, normal: 1 });
    const metrics = await (await fetch(`${r.rig.base}/metrics`)).text();
    expect(metrics).toMatch(/kvroute_flow_requests_total\{tenant="default",priority="normal",outcome="shed"\} 1/);
    expect(metrics).toMatch(/kvroute_admission_refused_total\{reason="shed"\} 1/);
  });

  it('keys a tenant by its API key’s hash, never the key itself', async () => {
    const lines: string[] = [];
    const r = await holdingProxy({
      maxInFlight: 4,
      observers: [{ onRequest: (record: unknown) => void lines.push(JSON.stringify(record)) }],
    });
    const response = send(r.rig.base, 'keyed', { authorization: 'Bearer sk-secret-key-1234567890' });
    await waitFor('the request upstream', () => r.held.length === 1);
    r.answer();
    expect((await response).status).toBe(200);
    await waitFor('its record', () => lines.length === 1);
    const tenant = apiKeyTenant('sk-secret-key-1234567890');
    expect(tenant).toMatch(/^key-[0-9a-f]{16}$/);
    expect(JSON.parse(lines[0]!)).toMatchObject({ tenant, priority: 'normal', queueMs: 0 });
    expect(lines[0]).not.toContain('sk-secret');
    const scraped = await (await fetch(`${r.rig.base}/metrics`)).text();
    expect(scraped).toContain(`kvroute_flow_requests_total{tenant="${tenant}",priority="normal",outcome="admitted"} 1`);
    expect(scraped).not.toContain('sk-secret');
  });

  it('changes weights live through the admin API; a bad config is a 400 naming the key', async () => {
    const r = await holdingProxy({ maxInFlight: 1, queueSize: 100 });
    const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    const postFlow = (flow: unknown) =>
      fetch(`${r.rig.base}/admin/flow`, { method: 'POST', headers, body: JSON.stringify({ flow }) });
    const bad = await postFlow({ tenants: { a: { weight: -1 } } });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toBe(
      'flow.tenants.a.weight must be a number > 0, got -1',
    );
    const typo = await postFlow({ tenants: { a: { wieght: 2 } } });
    expect(((await typo.json()) as { error: { message: string } }).error.message).toMatch(
      /^flow\.tenants\.a: unknown key "wieght"/,
    );
    const renamed = await postFlow({ classes: [{ name: 'gold' }] });
    expect(renamed.status).toBe(400);
    const good = await postFlow({ tenants: { heavy: { weight: 4 } } });
    expect(good.status).toBe(200);
    expect(((await good.json()) as { flow: { tenants: unknown } }).flow.tenants).toEqual({ heavy: { weight: 4 } });
    // Weight 4 against 1, equal costs: of the next 10 dispatches the heavy tenant gets about 8.
    const all = [send(r.rig.base, 'first')];
    await waitFor('one request held upstream', () => r.held.length === 1);
    for (let i = 0; i < 10; i++) all.push(send(r.rig.base, `light ${i}`, { 'x-kvroute-tenant': 'light' }));
    for (let i = 0; i < 10; i++) all.push(send(r.rig.base, `heavy ${i}`, { 'x-kvroute-tenant': 'heavy' }));
    await waitFor('20 queued', () => r.rig.proxy.state.admission.queued === 20);
    while (r.upstream.requests.length < 11) {
      if (r.held.length > 0) r.answer();
      await new Promise((resolve) => setImmediate(resolve));
    }
    const next10 = r.seen().slice(1, 11);
    expect(next10.filter((t) => t.startsWith('heavy')).length).toBeGreaterThanOrEqual(7);
    while (r.upstream.requests.length < 21 || r.held.length > 0) {
      if (r.held.length > 0) r.answer();
      await new Promise((resolve) => setImmediate(resolve));
    }
    await Promise.all(all);
  });
});
