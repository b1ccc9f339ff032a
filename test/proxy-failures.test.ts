/**
 * The proxy when things go wrong upstream or at the client: an engine killed mid-stream, an
 * engine refusing connections (re-routed, marked unhealthy, brought back by a health probe), an
 * engine that stalls (first-byte timeout, re-routed), upstream error statuses passed through,
 * a client aborting mid-stream (the proxy closes the endless upstream stream, the router's
 * counters return to zero), and a slow reader (backpressure: bounded buffering, bytes intact).
 */
import { request } from 'node:http';

import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import { startSimFleet } from '../src/sim/sim-fleet.js';
import { eventWithin, MODEL, post, refusingUrl, refusingUrls, scopedRigs, startStub } from './helpers/proxy-harness.js';
import { within } from './helpers/wait-for.js';

/** The upstream client the current suite runs with (every suite runs with both). */
let upstream: 'h1' | 'undici' = 'h1';
const rigs = scopedRigs(() => ({ upstream }));
const { proxyFor, stub } = rigs;
const cleanups = { push: rigs.add };
afterEach(() => rigs.closeAll());

type ErrorReply = { error: { code: string; type: string; message: string } };

const chat = (extra: object = {}) => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'hello' }],
  max_tokens: 4,
  ...extra,
});

/** An SSE event as an engine writes it. */
const sse = (n: number): string => `data: {"n":${n},"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n`;

describe.each(['h1', 'undici'] as const)('upstream client %s', (client) => {
  beforeAll(() => {
    upstream = client;
  });

  describe('proxy: upstream failures', () => {
    it('an engine killed mid-stream: the stream ends with an SSE error event, then [DONE]', async () => {
      const fleet = await startSimFleet({ instances: 1, port: 0, speed: 5 });
      cleanups.push(() => fleet.close());
      const rig = await proxyFor({ backends: fleet.urls });
      const response = await post(rig.base, '/v1/chat/completions', chat({ max_tokens: 10_000, stream: true }));
      expect(response.status).toBe(200);
      const reader = response.body!.getReader();
      const first = await reader.read();
      expect(new TextDecoder().decode(first.value)).toMatch(/^data: /);
      await fleet.close();
      let text = '';
      for (let i = 0; i < 100_000; i++) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      const events = text.split('\n\n').filter((e) => e !== '');
      expect(events.at(-1)).toBe('data: [DONE]');
      const error = JSON.parse(events.at(-2)!.slice(6));
      expect(error.error).toMatchObject({ type: 'server_error', code: 'upstream_interrupted' });
      await rig.observer.until(() => rig.observer.named('finished').length === 1);
      expect(rig.observer.named('upstreamError')[0]).toEqual(['upstreamError', fleet.urls[0], 'reset', true]);
      expect(rig.proxy.router.stats().inFlight).toBe(0);
    });

    it('a non-streaming response cut mid-body becomes a 502 JSON error', async () => {
      const upstream = await stub((_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
        res.write('{"id":"partial",');
        res.once('finish', () => {});
        setImmediate(() => res.socket?.destroy());
      });
      const rig = await proxyFor({ backends: [upstream.url] });
      const response = await post(rig.base, '/v1/chat/completions', chat());
      expect(response.status).toBe(502);
      expect(((await response.json()) as ErrorReply).error.code).toBe('upstream_interrupted');
      expect(rig.observer.named('retry')).toEqual([]);
      expect(rig.proxy.router.stats().inFlight).toBe(0);
    });

    it('an engine down at start: not routable, /ready honest, routed once its probe passes', async () => {
      const dead = await refusingUrl();
      const fleet = await startSimFleet({ instances: 1, port: 0, speed: 50 });
      cleanups.push(() => fleet.close());
      const rig = await proxyFor({ backends: [dead, fleet.urls[0]!], policy: 'round_robin', healthBackoffMs: 50 });
      expect(rig.proxy.state.backend(dead)!.healthy).toBe(false);
      const ready = (await (await fetch(`${rig.base}/ready`)).json()) as { routable_backends: number };
      expect(ready.routable_backends).toBe(1);
      for (let i = 0; i < 4; i++) {
        const r = await post(rig.base, '/v1/chat/completions', chat());
        expect(r.headers.get('x-kvroute-instance')).toBe(fleet.urls[0]);
        await r.arrayBuffer();
      }
      expect(rig.observer.named('retry')).toEqual([]); // never tried: no client paid for finding it dead

      // The engine comes up on its port: a probe finds /health answering and routing resumes.
      const port = Number(new URL(dead).port);
      await stub(
        (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"revived":true}'),
        port,
      );
      await rig.observer.until(() => rig.observer.named('health').length === 1, 10_000, 'the backend to come up');
      expect(rig.observer.named('health')).toEqual([['health', dead, true]]);
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) {
        const r = await post(rig.base, '/v1/chat/completions', chat());
        seen.add(r.headers.get('x-kvroute-instance')!);
        await r.arrayBuffer();
      }
      expect(seen).toEqual(new Set([dead, fleet.urls[0]]));
    });

    it('an engine that dies: re-routed, marked unhealthy, back after a health probe', async () => {
      const dying = await startStub((_req, res) =>
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
      );
      const fleet = await startSimFleet({ instances: 1, port: 0, speed: 50 });
      cleanups.push(() => fleet.close());
      const rig = await proxyFor({
        backends: [dying.url, fleet.urls[0]!],
        policy: 'round_robin',
        healthBackoffMs: 50,
        healthIntervalMs: 0, // only the request finds it dead
      });
      await dying.close();
      const response = await post(rig.base, '/v1/chat/completions', chat());
      expect(response.status).toBe(200);
      expect(response.headers.get('x-kvroute-instance')).toBe(fleet.urls[0]);
      expect(rig.observer.named('upstreamError')).toEqual([['upstreamError', dying.url, 'refused', false]]);
      expect(rig.observer.named('retry')).toEqual([['retry', dying.url]]);
      expect(rig.proxy.state.backend(dying.url)!.healthy).toBe(false);
      expect(rig.observer.named('health')).toEqual([['health', dying.url, false]]);
      // Unhealthy: no more requests go there.
      for (let i = 0; i < 4; i++) {
        const r = await post(rig.base, '/v1/chat/completions', chat());
        expect(r.headers.get('x-kvroute-instance')).toBe(fleet.urls[0]);
        await r.arrayBuffer();
      }
      expect(rig.observer.named('retry')).toHaveLength(1);
      expect(
        ((await (await fetch(`${rig.base}/ready`)).json()) as { routable_backends: number }).routable_backends,
      ).toBe(1);

      // It comes back on its port: a probe finds /health answering and routing resumes.
      const port = Number(new URL(dying.url).port);
      await stub(
        (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"revived":true}'),
        port,
      );
      await rig.observer.until(() => rig.observer.named('health').length === 2, 10_000, 'the backend to recover');
      expect(rig.observer.named('health')[1]).toEqual(['health', dying.url, true]);
      const seen = new Set<string>();
      for (let i = 0; i < 4; i++) {
        const r = await post(rig.base, '/v1/chat/completions', chat());
        seen.add(r.headers.get('x-kvroute-instance')!);
        await r.arrayBuffer();
      }
      expect(seen).toEqual(new Set([dying.url, fleet.urls[0]]));
    });

    it('every backend down at start: not ready, 503 with Retry-After, no engine touched', async () => {
      const dead = await refusingUrls(3);
      const rig = await proxyFor({ backends: dead, retries: 2, healthBackoffMs: 60_000 });
      const ready = await fetch(`${rig.base}/ready`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ ready: false, routable_backends: 0 });
      const none = await post(rig.base, '/v1/chat/completions', chat());
      expect(none.status).toBe(503);
      expect(none.headers.get('retry-after')).toBe('1');
      expect(((await none.json()) as ErrorReply).error.code).toBe('no_healthy_backend');
      expect(rig.observer.named('upstreamError')).toEqual([]);
      expect(rig.proxy.state.snapshot().map((b) => b.lastFailure)).toEqual(
        dead.map(() => expect.stringMatching(/GET \/health failed: ECONNREFUSED/)),
      );
    });

    it('every backend dying: 502 after --retries re-routes, then 503 with Retry-After', async () => {
      const dying = await Promise.all([0, 1, 2].map(() => startStub((_req, res) => res.writeHead(200).end('{}'))));
      const rig = await proxyFor({
        backends: dying.map((d) => d.url),
        retries: 2,
        healthBackoffMs: 60_000,
        healthIntervalMs: 0,
      });
      for (const d of dying) await d.close();
      const response = await post(rig.base, '/v1/chat/completions', chat());
      expect(response.status).toBe(502);
      expect(((await response.json()) as ErrorReply).error).toMatchObject({
        type: 'server_error',
        code: 'upstream_error',
      });
      expect(rig.observer.named('retry')).toHaveLength(2);
      expect(rig.observer.named('upstreamError')).toHaveLength(3);
      const none = await post(rig.base, '/v1/chat/completions', chat());
      expect(none.status).toBe(503);
      expect(none.headers.get('retry-after')).toBe('1');
      expect(((await none.json()) as ErrorReply).error.code).toBe('no_healthy_backend');
      expect((await fetch(`${rig.base}/ready`)).status).toBe(503);
      expect(rig.proxy.router.stats().inFlight).toBe(0);
    });

    it('an engine that stalls: first-byte timeout, re-routed to a healthy one', async () => {
      const stalled = await stub(() => {
        // never answers
      });
      const fleet = await startSimFleet({ instances: 1, port: 0, speed: 50 });
      cleanups.push(() => fleet.close());
      const rig = await proxyFor({
        backends: [stalled.url, fleet.urls[0]!],
        policy: 'round_robin',
        firstByteTimeoutMs: 300,
        healthBackoffMs: 60_000,
      });
      const started = Date.now();
      const response = await post(rig.base, '/v1/chat/completions', chat({ stream: true }));
      expect(response.status).toBe(200);
      expect(response.headers.get('x-kvroute-instance')).toBe(fleet.urls[0]);
      expect(await response.text()).toMatch(/data: \[DONE\]\n\n$/);
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      expect(rig.observer.named('upstreamError')).toEqual([
        ['upstreamError', stalled.url, 'first_byte_timeout', false],
      ]);
      expect(stalled.requests).toHaveLength(1);
    });

    it('a drained backend finishes its in-flight stream and gets no new requests', async () => {
      let release: (() => void) | undefined;
      const upstream = await stub((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(sse(0));
        release = () => res.end(`${sse(1)}data: [DONE]\n\n`);
      });
      const other = await stub((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
      const rig = await proxyFor({ backends: [upstream.url, other.url], policy: 'round_robin' });
      const streaming = await post(rig.base, '/v1/chat/completions', chat({ stream: true }));
      expect(streaming.headers.get('x-kvroute-instance')).toBe(upstream.url);
      const reader = streaming.body!.getReader();
      await reader.read();
      rig.proxy.state.drainBackend(upstream.url);
      for (let i = 0; i < 3; i++) {
        const r = await post(rig.base, '/v1/chat/completions', chat());
        expect(r.headers.get('x-kvroute-instance')).toBe(other.url);
        await r.arrayBuffer();
      }
      release!();
      let text = '';
      for (let i = 0; i < 1_000; i++) {
        const { value, done } = await reader.read();
        if (done) break;
        text += new TextDecoder().decode(value);
      }
      expect(text).toMatch(/"n":1.*\n\ndata: \[DONE\]\n\n$/s);
      expect(upstream.requests).toHaveLength(1);
      expect(rig.proxy.state.snapshot().find((b) => b.id === upstream.url)).toMatchObject({
        drained: true,
        inFlight: 0,
      });
      expect(rig.proxy.router.stats().inFlight).toBe(0);
    });

    it('upstream error statuses pass through unchanged and are not retried', async () => {
      const body = '{"error":{"message":"slow down","type":"rate_limit","param":null,"code":429}}';
      const upstream = await stub((_req, res) => {
        res.writeHead(429, { 'content-type': 'application/json', 'x-engine': 'busy' }).end(body);
      });
      const rig = await proxyFor({ backends: [upstream.url] });
      const response = await post(rig.base, '/v1/chat/completions', chat({ stream: true }));
      expect(response.status).toBe(429);
      expect(response.headers.get('x-engine')).toBe('busy');
      expect(await response.text()).toBe(body);
      expect(upstream.requests).toHaveLength(1);
      expect(rig.proxy.state.backend(upstream.url)!.healthy).toBe(true);
    });
  });

  describe('proxy: the client side', () => {
    it('client abort mid-stream: the proxy closes the upstream stream; counters return to zero', async () => {
      // The upstream streams until its connection closes; only the proxy can close it.
      let upstreamClosed: (() => void) | undefined;
      const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
      const upstream = await stub((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        let n = 0;
        const timer = setInterval(() => res.write(sse(n++)), 10);
        res.once('close', () => {
          clearInterval(timer);
          upstreamClosed!();
        });
      });
      const rig = await proxyFor({ backends: [upstream.url] });
      const url = new URL(`${rig.base}/v1/chat/completions`);
      const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json' } });
      req.end(JSON.stringify(chat({ stream: true })));
      const res = await eventWithin<import('node:http').IncomingMessage>(req, 'response', 5_000);
      expect(res.statusCode).toBe(200);
      await eventWithin(res, 'data', 5_000);
      expect(rig.proxy.router.stats().inFlight).toBe(1);
      req.destroy();
      await within("the upstream's connection to close after the client's abort", closed);
      await rig.observer.until(() => rig.observer.named('finished').length === 1);
      expect(rig.observer.named('finished')[0]![2]).toBe(499);
      expect(rig.proxy.router.stats().inFlight).toBe(0);
      expect(rig.proxy.state.inFlight()).toEqual({ [upstream.url]: 0 });
      expect(rig.proxy.router.stats().instances[0]!.aborted).toBe(1);
    });

    it('client abort before the upstream answers: aborted upstream, ticket released', async () => {
      let upstreamClosed: (() => void) | undefined;
      const closed = new Promise<void>((resolve) => (upstreamClosed = resolve));
      let arrived: (() => void) | undefined;
      const arrivedP = new Promise<void>((resolve) => (arrived = resolve));
      const upstream = await stub((_req, res) => {
        arrived!();
        res.once('close', () => upstreamClosed!());
      });
      const rig = await proxyFor({ backends: [upstream.url] });
      const req = request(new URL(`${rig.base}/v1/completions`), { method: 'POST' });
      req.on('error', () => {});
      req.end(JSON.stringify({ model: MODEL, prompt: 'hi' }));
      await arrivedP;
      req.destroy();
      await within("the upstream's connection to close after the client's abort", closed);
      await rig.observer.until(() => rig.observer.named('finished').length === 1);
      expect(rig.proxy.router.stats().inFlight).toBe(0);
    });

    it('a slow reader: upstream reading pauses (bounded buffering), every byte arrives in order', async () => {
      const events = 40_000; // × ~1.6 kB = ~64 MB
      const pad = 'p'.repeat(1_600);
      let written = 0;
      const upstream = await stub((_req, res) => {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        let n = 0;
        const pump = (): void => {
          while (n < events) {
            const chunk = `data: {"n":${n},"pad":"${pad}"}\n\n`;
            n++;
            written += chunk.length;
            if (!res.write(chunk)) {
              res.once('drain', pump);
              return;
            }
          }
          res.end('data: [DONE]\n\n');
        };
        pump();
      });
      const rig = await proxyFor({ backends: [upstream.url] });
      const req = request(new URL(`${rig.base}/v1/chat/completions`), {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
      });
      req.end(JSON.stringify(chat({ stream: true })));
      const res = await eventWithin<import('node:http').IncomingMessage>(req, 'response', 5_000);
      const received: Buffer[] = [];
      let receivedBytes = 0;
      res.on('data', (c: Buffer) => {
        received.push(c);
        receivedBytes += c.length;
      });
      res.pause();
      // The slow reader: nothing read for 1.5 s. The upstream must stall well before its end.
      const heapBefore = process.memoryUsage().arrayBuffers;
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const ahead = written - receivedBytes;
      const heapGrowth = process.memoryUsage().arrayBuffers - heapBefore;
      expect(written).toBeLessThan(events * pad.length * 0.5);
      expect(ahead).toBeLessThan(32 * 2 ** 20);
      expect(heapGrowth).toBeLessThan(32 * 2 ** 20);
      // Then it reads, in small sips, to the end.
      const ended = eventWithin(res, 'end', 30_000);
      res.resume();
      await ended;
      const text = Buffer.concat(received).toString();
      const lines = text.split('\n\n').filter((e) => e !== '');
      expect(lines).toHaveLength(events + 1);
      expect(lines.at(-1)).toBe('data: [DONE]');
      for (let i = 0; i < events; i += 997) expect(lines[i]).toBe(`data: {"n":${i},"pad":"${pad}"}`);
      expect(lines.slice(0, -1).every((l, i) => l.startsWith(`data: {"n":${i},`))).toBe(true);
      expect(rig.proxy.router.stats().inFlight).toBe(0);
    });
  });
});
