/**
 * The proxy over time: a stalled engine found by its health probes within seconds, failures
 * after the first byte recorded as failures, the request deadline, graceful shutdown with
 * pooled client connections (in both server modes), compressed bodies, and the memory budget
 * for request bodies.
 */
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';

import { Pool } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';

import { createProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import { startSimFleet } from '../src/sim/sim-fleet.js';
import { MODEL, post, scopedRigs, startProxy } from './helpers/proxy-harness.js';
import { startSimServe } from './helpers/sim-serve-child.js';

const rigs = scopedRigs();
const { proxyFor, stub } = rigs;
const cleanups = { push: rigs.add };
afterEach(() => rigs.closeAll());

type ErrorReply = { error: { code: string; type: string; message: string } };
const chat = (extra: object = {}) => ({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], ...extra });
const sse = (n: number): string => `data: {"n":${n},"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n`;

/** Resolves with `promise`, or rejects after `ms` naming what did not happen. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Reads a fetch body to its end, as text. */
async function readAll(response: Response): Promise<string> {
  return await response.text();
}

describe('a stalled engine', () => {
  it('is out of routing within seconds (SIGSTOP), its running request kept; back after SIGCONT', async () => {
    const stalled = await startSimServe(1, ['--speed', '50']);
    cleanups.push(async () => {
      stalled.child.kill('SIGCONT');
      await stalled.stop();
    });
    const fleet = await startSimFleet({ instances: 1, port: 0, speed: 50 });
    cleanups.push(() => fleet.close());
    const [stalledUrl] = stalled.urls;
    const rig = await proxyFor({
      backends: [stalledUrl!, fleet.urls[0]!],
      policy: 'round_robin',
      healthIntervalMs: 200,
      healthTimeoutMs: 300,
      healthFailures: 2,
      healthBackoffMs: 100,
    });
    // A long stream on the engine that is about to stall.
    const running = await post(rig.base, '/v1/chat/completions', chat({ stream: true, max_tokens: 400 }));
    expect(running.headers.get('x-kvroute-instance')).toBe(stalledUrl);
    const reader = running.body!.getReader();
    await reader.read();

    stalled.child.kill('SIGSTOP');
    const stoppedAt = Date.now();
    await rig.observer.until(() => rig.observer.named('health').length === 1, 8_000, 'the stall to be detected');
    const detectedMs = Date.now() - stoppedAt;
    expect(rig.observer.named('health')).toEqual([['health', stalledUrl, false]]);
    expect(detectedMs).toBeLessThan(8_000);
    expect(rig.proxy.state.snapshot()[0]!.lastFailure).toMatch(/did not answer within 300 ms/);
    for (let i = 0; i < 4; i++) {
      const r = await post(rig.base, '/v1/chat/completions', chat({ max_tokens: 2 }));
      expect(r.headers.get('x-kvroute-instance')).toBe(fleet.urls[0]);
      await r.arrayBuffer();
    }
    // The running request is not cut by the breaker: only its own timeouts may end it.
    expect(rig.observer.named('upstreamError')).toEqual([]);

    stalled.child.kill('SIGCONT');
    await rig.observer.until(() => rig.observer.named('health').length === 2, 8_000, 'the engine to recover');
    expect(rig.observer.named('health')[1]).toEqual(['health', stalledUrl, true]);
    let text = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    expect(text).toMatch(/data: \[DONE\]\n\n$/);
  });
});

describe('failures after the first byte are failures', () => {
  it('a stream cut by the engine: status 200 on the wire, outcome interrupted, an error in the record and the metrics', async () => {
    const fleet = await startSimFleet({ instances: 1, port: 0, speed: 5 });
    cleanups.push(() => fleet.close());
    const metrics = createProxyMetrics({ defaultMetrics: false });
    const rig = await proxyFor({ backends: fleet.urls, observers: [metrics.observer], mounts: [metrics.mount] });
    const response = await post(rig.base, '/v1/chat/completions', chat({ max_tokens: 10_000, stream: true }));
    const reader = response.body!.getReader();
    await reader.read();
    await fleet.close();
    for (;;) if ((await reader.read()).done) break;
    await rig.observer.until(() => rig.observer.records().length === 1);
    const [record] = rig.observer.records();
    expect(record).toMatchObject({ status: 200, outcome: 'interrupted', model: MODEL });
    expect(record!.error).toMatch(/^upstream_interrupted: upstream http:\/\/127\.0\.0\.1:\d+ failed mid-response/);
    const text = await (await fetch(`${rig.base}/metrics`)).text();
    expect(text).toMatch(
      new RegExp(`kvroute_requests_total\\{[^}]*status="200",outcome="interrupted",model="${MODEL}"\\} 1`),
    );
    expect(text).not.toMatch(/outcome="success"/);
  });
});

describe('--request-timeout', () => {
  it('before the first byte: 504 request_timeout, and the engine sees the request cancelled', async () => {
    let cancelled!: () => void;
    const upstreamClosed = new Promise<void>((resolve) => (cancelled = resolve));
    const upstream = await stub((req) => req.socket.once('close', cancelled));
    const rig = await proxyFor({ backends: [upstream.url], requestTimeoutMs: 300 });
    const started = Date.now();
    const response = await post(rig.base, '/v1/chat/completions', chat());
    expect(response.status).toBe(504);
    expect(((await response.json()) as ErrorReply).error.code).toBe('request_timeout');
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await within(upstreamClosed, 5_000, 'the upstream connection to close');
    expect(rig.observer.records()[0]).toMatchObject({ status: 504, outcome: 'error' });
    expect(rig.proxy.router.stats().inFlight).toBe(0);
    expect(rig.proxy.state.backend(upstream.url)!.healthy).toBe(true); // a deadline is not the engine failing
  });

  it('mid-stream: an in-band error event and [DONE], recorded as interrupted', async () => {
    const upstream = await stub((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse(0)); // then silence
    });
    const rig = await proxyFor({ backends: [upstream.url], requestTimeoutMs: 400 });
    const response = await post(rig.base, '/v1/chat/completions', chat({ stream: true }));
    expect(response.status).toBe(200);
    const events = (await readAll(response)).split('\n\n').filter((e) => e !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(JSON.parse(events.at(-2)!.slice(6)).error.code).toBe('request_timeout');
    await rig.observer.until(() => rig.observer.records().length === 1);
    expect(rig.observer.records()[0]).toMatchObject({ status: 200, outcome: 'interrupted' });
    expect(rig.proxy.router.stats().inFlight).toBe(0);
  });
});

describe.each(['uws', 'node'] as const)('graceful shutdown (%s server), with pooled client connections', (http) => {
  it('not ready at once; requests on open connections are served with connection: close, never a 502', async () => {
    let release: (() => void) | undefined;
    const upstream = await stub((req, res, body) => {
      const hold = JSON.parse(body.toString()).messages[0].content === 'hold';
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(sse(0));
      if (hold) release = () => res.end(`${sse(1)}data: [DONE]\n\n`);
      else res.end('data: [DONE]\n\n');
    });
    const rig = await startProxy({ backends: [upstream.url], http });
    const pool = new Pool(rig.base, { connections: 3, pipelining: 1 });
    cleanups.push(async () => {
      await pool.destroy();
      await rig.close();
    });
    const send = (content: string, path = '/v1/chat/completions') =>
      pool.request({
        path,
        method: path === '/ready' ? 'GET' : 'POST',
        headers: { 'content-type': 'application/json' },
        body:
          path === '/ready' ? undefined : JSON.stringify(chat({ stream: true, messages: [{ role: 'user', content }] })),
      });
    // Three connections open and kept alive: one holds a running stream, two are idle.
    const held = await send('hold');
    expect(held.statusCode).toBe(200);
    const warm = await Promise.all([send('warm'), send('warm')]);
    for (const w of warm) await w.body.text();
    expect(held.headers.connection).not.toBe('close');

    const closing = rig.proxy.close({ graceMs: 5_000 });
    const ready = await send('', '/ready');
    expect(ready.statusCode).toBe(503);
    expect(ready.headers.connection).toBe('close');
    expect(await ready.body.json()).toMatchObject({ ready: false, closing: true });
    const late = await send('late');
    expect(late.statusCode).toBe(200);
    expect(late.headers.connection).toBe('close');
    expect(await late.body.text()).toMatch(/data: \[DONE\]\n\n$/);

    release!();
    expect(await held.body.text()).toMatch(/"n":1.*data: \[DONE\]\n\n$/s);
    await closing;
    expect(rig.observer.records().map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(rig.observer.named('upstreamError')).toEqual([]);
  });
});

describe('compressed request bodies', () => {
  it('gzip, deflate and br are decoded before routing and sent on decoded; other codings get 415', async () => {
    const upstream = await stub((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    const rig = await proxyFor({ backends: [upstream.url] });
    const json = JSON.stringify(chat({ user: 'someone' }));
    const encoders: Array<[string, (b: Buffer) => Buffer]> = [
      ['gzip', gzipSync],
      ['x-gzip', gzipSync],
      ['deflate', deflateSync],
      ['br', brotliCompressSync],
    ];
    for (const [coding, encode] of encoders) {
      const response = await post(rig.base, '/v1/chat/completions', encode(Buffer.from(json)), {
        'content-encoding': coding,
      });
      expect(response.status, coding).toBe(200);
      await response.arrayBuffer();
      const forwarded = upstream.requests.at(-1)!;
      expect(forwarded.body.toString()).toBe(json);
      expect(forwarded.headers['content-encoding']).toBeUndefined();
    }
    const before = upstream.requests.length;
    const refused = await post(rig.base, '/v1/chat/completions', Buffer.from(json), { 'content-encoding': 'compress' });
    expect(refused.status).toBe(415);
    expect(refused.headers.get('accept-encoding')).toBe('gzip, deflate, br');
    expect(((await refused.json()) as ErrorReply).error.code).toBe('unsupported_encoding');
    const corrupt = await post(rig.base, '/v1/chat/completions', Buffer.from('not gzip at all'), {
      'content-encoding': 'gzip',
    });
    expect(corrupt.status).toBe(400);
    expect(((await corrupt.json()) as ErrorReply).error.message).toMatch(/not valid gzip/);
    expect(upstream.requests.length).toBe(before);
  });

  it('a body that inflates past --max-body is 413, however small it arrives', async () => {
    const upstream = await stub((_req, res) => res.writeHead(200).end('{}'));
    const rig = await proxyFor({ backends: [upstream.url], maxBodyBytes: 64 * 1024 });
    const bomb = gzipSync(Buffer.from(JSON.stringify(chat({ padding: 'x'.repeat(4 * 2 ** 20) }))));
    expect(bomb.length).toBeLessThan(64 * 1024);
    const response = await post(rig.base, '/v1/chat/completions', bomb, { 'content-encoding': 'gzip' });
    expect(response.status).toBe(413);
    expect(((await response.json()) as ErrorReply).error.code).toBe('body_too_large');
    expect(upstream.requests).toEqual([]);
    expect(rig.proxy.state.bodies.held).toBe(0);
  });
});

describe('the memory budget for request bodies (--max-body-memory)', () => {
  it('refuses a body that would pass it with 503 + Retry-After, and frees every byte afterwards', async () => {
    const held: Array<() => void> = [];
    let arrived: () => void = () => {};
    const nextArrival = () => new Promise<void>((resolve) => (arrived = resolve));
    const upstream = await stub((_req, res) => {
      held.push(() => res.writeHead(200).end('{}'));
      arrived();
    });
    const rig = await proxyFor({ backends: [upstream.url], maxBodyBytes: 48 * 1024, maxBodyMemoryBytes: 64 * 1024 });
    const body = (n: number) => JSON.stringify(chat({ padding: 'x'.repeat(n) }));
    let arrival = nextArrival();
    const first = post(rig.base, '/v1/chat/completions', body(40 * 1024));
    await within(arrival, 5_000, 'the first request upstream');
    expect(rig.proxy.state.bodies.held).toBeGreaterThan(40 * 1024);

    const refused = await post(rig.base, '/v1/chat/completions', body(40 * 1024));
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as ErrorReply).error.code).toBe('body_budget_exceeded');
    // Without a Content-Length the body is counted as it arrives.
    const chunked = await fetch(`${rig.base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(new TextEncoder().encode(body(40 * 1024)));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(503);
    await chunked.arrayBuffer();

    held.shift()!();
    expect((await first).status).toBe(200);
    expect(rig.proxy.state.bodies.held).toBe(0); // released before the response's last byte went out
    arrival = nextArrival();
    const after = post(rig.base, '/v1/chat/completions', body(40 * 1024));
    await within(arrival, 5_000, 'the second request upstream');
    held.shift()!();
    expect((await after).status).toBe(200);
    expect(rig.proxy.state.bodies.refused).toBe(2);
  });
});
