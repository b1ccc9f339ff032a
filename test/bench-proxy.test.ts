/**
 * The proxy benchmark's harness keeps working: the stub backend answers as an OpenAI upstream, and
 * the load generators count what they should, briefly (a few hundred requests). Shape only;
 * performance targets are checked by the benchmark itself (`npm run bench -- --only proxy`), never
 * here. nginx is exercised only where it is installed.
 */
import net from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { checkStream, closedLoop, openStreams, percentiles, type Target } from '../bench/lib/proxy-load.js';
import {
  findNginx,
  kvrouteServeAvailable,
  nginxConfig,
  startFloor,
  startKvroute,
  startNginx,
  startStub,
  type Running,
} from '../bench/lib/proxy-procs.js';
import { threadsTargetChecks } from '../bench/lib/threads-report.mjs';
import { findWrk, wrkLoop } from '../bench/lib/wrk-load.js';

const CHUNKS = 4;
const body = (stream: boolean) =>
  JSON.stringify({ model: 'stub', messages: [{ role: 'user', content: 'hi' }], hash_ids: [1, 2, 3], stream });
const target = (port: number, stream: boolean, path = '/v1/chat/completions'): Target => ({
  port,
  path,
  requests: [
    { body: body(stream), headers: { 'x-session-id': 's1' } },
    { body: body(stream), headers: { 'x-session-id': 's2' } },
  ],
});

describe('proxy bench harness', () => {
  let stub: Running;
  beforeAll(async () => {
    stub = await startStub({ ports: 2, chunks: CHUNKS, chunkDelayMs: 2 });
  });
  afterAll(async () => {
    await stub?.stop();
  });

  it('the stub answers a fixed completion with usage, on every port', async () => {
    expect(stub.ports).toHaveLength(2);
    for (const port of stub.ports) {
      const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', body: body(false) });
      expect(res.status).toBe(200);
      const json = (await res.json()) as { object: string; usage: { completion_tokens: number } };
      expect(json.object).toBe('chat.completion');
      expect(json.usage.completion_tokens).toBe(CHUNKS);
    }
    const completion = await fetch(`http://127.0.0.1:${stub.port}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ model: 'stub', prompt: 'hi', stream: true }),
    });
    expect(completion.headers.get('content-type')).toBe('text/event-stream');
    expect(checkStream(await completion.text(), CHUNKS)).toBeUndefined();
    expect((await fetch(`http://127.0.0.1:${stub.port}/nope`)).status).toBe(404);
  });

  it('closedLoop counts every request and keeps a latency per response', async () => {
    const r = await closedLoop(target(stub.port, false), { connections: 4, amount: 300 });
    expect(r.ok).toBe(300);
    expect(r.errors).toBe(0);
    expect(r.latencies).toHaveLength(300);
    const { p50_us, p99_us } = percentiles(r.latencies);
    expect(p50_us).toBeGreaterThan(0);
    expect(p99_us).toBeGreaterThanOrEqual(p50_us);
    const streamed = await closedLoop(target(stub.port, true), { connections: 4, amount: 40 });
    expect(streamed.ok).toBe(40);
  });

  it('closedLoop counts non-2xx answers as errors', async () => {
    const r = await closedLoop(target(stub.port, false, '/v1/nope'), { connections: 2, amount: 20 });
    expect(r.ok).toBe(0);
    expect(r.errors).toBe(20);
  });

  it('openStreams keeps streams in flight, reads each to [DONE] and checks it', async () => {
    const r = await openStreams(target(stub.port, true), {
      streams: 50,
      seconds: 0.3,
      chunks: CHUNKS,
      timeoutMs: 5000,
    });
    expect(r.errors + r.incomplete).toBe(0);
    expect(r.complete).toBeGreaterThanOrEqual(50);
    expect(r.total).toHaveLength(r.complete);
    expect(percentiles(r.ttfb).p50_us).toBeLessThanOrEqual(percentiles(r.total).p50_us);
    // The stub sends CHUNKS chunks; expecting more makes every stream incomplete, and says why.
    const short = await openStreams(target(stub.port, true), {
      streams: 5,
      seconds: 0.05,
      chunks: CHUNKS + 1,
      timeoutMs: 5000,
    });
    expect(short.complete).toBe(0);
    expect(short.incomplete).toBeGreaterThanOrEqual(5);
    expect(short.firstError).toBe(`${CHUNKS} content chunks, expected ${CHUNKS + 1}`);
  });

  it('openStreams counts refused connections as errors and gives up on a dead server early', async () => {
    const dead = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as net.AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const started = performance.now();
    const r = await openStreams(target(dead, true), { streams: 2, seconds: 20, chunks: CHUNKS, timeoutMs: 5000 });
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(r.complete).toBe(0);
    expect(r.errors).toBeGreaterThan(20);
    expect(r.firstError).toMatch(/ECONNREFUSED/);
  });

  it('checkStream tells a whole stream from a truncated or failed one', () => {
    const event = (s: string) => `data: ${s}\n\n`;
    const whole = event('{"choices":[1]}').repeat(2) + event('{"choices":[],"usage":{}}') + event('[DONE]');
    expect(checkStream(whole, 2)).toBeUndefined();
    expect(checkStream(whole.slice(0, -'data: [DONE]\n\n'.length), 2)).toMatch(/without \[DONE\]/);
    expect(checkStream(event('{"error":{"message":"upstream"}}') + event('[DONE]'), 2)).toMatch(/^error event/);
    expect(checkStream(event('{"choices":[1]}') + event('[DONE]'), 1)).toBe('no usage chunk before [DONE]');
  });

  it('the nginx config keeps every path in its prefix and proxies SSE unbuffered', () => {
    const conf = nginxConfig('/tmp/x', 8080, [1001, 1002], false);
    expect(conf).toContain('worker_processes 1;');
    expect(conf).toContain('listen 127.0.0.1:8080');
    expect(conf).toContain('server 127.0.0.1:1001;');
    expect(conf).toContain('proxy_buffering off;');
    expect(conf).toContain('proxy_http_version 1.1;');
    for (const line of conf.split('\n').filter((l) => /(_path|pid|error_log) /.test(l)))
      expect(line).toContain('/tmp/x/');
  });

  it.skipIf(findNginx() === undefined)('through nginx (where installed): same answers, nothing lost', async () => {
    const nginx = await startNginx(findNginx()!, stub.ports);
    try {
      const r = await closedLoop(target(nginx.port, false), { connections: 4, amount: 200 });
      expect(r).toMatchObject({ ok: 200, errors: 0 });
      const s = await openStreams(target(nginx.port, true), {
        streams: 20,
        seconds: 0.2,
        chunks: CHUNKS,
        timeoutMs: 5000,
      });
      expect(s.errors + s.incomplete).toBe(0);
      expect(s.complete).toBeGreaterThanOrEqual(20);
    } finally {
      await nginx.stop();
    }
  });

  it('through the floor relay: same answers, nothing lost, aborted streams drained, exit 0', async () => {
    const floor = await startFloor(stub.ports);
    let stopped = false;
    try {
      const r = await closedLoop(target(floor.port, false), { connections: 4, amount: 200 });
      expect(r).toMatchObject({ ok: 200, errors: 0 });
      // Clients that go away mid-stream: the floor still reads those responses to their end.
      const aborts = Array.from({ length: 8 }, async () => {
        const controller = new AbortController();
        const res = await fetch(`http://127.0.0.1:${floor.port}/v1/chat/completions`, {
          method: 'POST',
          body: body(true),
          signal: controller.signal,
        });
        await res.body!.getReader().read();
        controller.abort();
      });
      await Promise.all(aborts);
      const s = await openStreams(target(floor.port, true), {
        streams: 20,
        seconds: 0.2,
        chunks: CHUNKS,
        timeoutMs: 5000,
      });
      expect(s.firstError).toBeUndefined();
      expect(s.complete).toBeGreaterThanOrEqual(20);
      expect((await fetch(`http://127.0.0.1:${floor.port}/v1/nope`, { method: 'POST', body: '{}' })).status).toBe(404);
      stopped = true;
      expect(await floor.stop()).toBeUndefined(); // SIGTERM → exit 0
    } finally {
      if (!stopped) await floor.stop();
    }
  });

  it('the floor relay answers 502 when its backend is gone', async () => {
    const dead = await new Promise<number>((resolve) => {
      const server = net.createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as net.AddressInfo;
        server.close(() => resolve(port));
      });
    });
    const floor = await startFloor([dead]);
    try {
      const res = await fetch(`http://127.0.0.1:${floor.port}/v1/chat/completions`, {
        method: 'POST',
        body: body(false),
      });
      expect(res.status).toBe(502);
    } finally {
      await floor.stop();
    }
  });

  it.skipIf(findWrk() === undefined)("wrk (where installed) cycles the target's requests and counts them", async () => {
    const r = await wrkLoop(findWrk()!, target(stub.port, false), 4, 1);
    expect(r.errors).toBe(0);
    expect(r.ok).toBeGreaterThan(10);
    expect(r.rps).toBeGreaterThan(0);
    expect(r.p50_us).toBeGreaterThan(0);
    expect(r.p99_us).toBeGreaterThanOrEqual(r.p50_us);
    const missing = await wrkLoop(findWrk()!, target(stub.port, false, '/nope'), 2, 1);
    expect(missing.ok).toBe(0); // the stub's 404s are errors, not requests served
    expect(missing.errors).toBeGreaterThan(0);
  });

  it('the threads target is MET only with both the req/s and the CPU-per-request ratio', () => {
    const leg = (target: string, rps: number, cpu: number) => ({
      workload: 'proxy-threads',
      kind: 'proxy-threads',
      target,
      rps,
      cpu_us_per_req: cpu,
    });
    const check = (rps2: number, cpu2: number) =>
      threadsTargetChecks([leg('kvroute-threads-1', 1000, 100), leg('kvroute-threads-2', rps2, cpu2)])[0];
    expect(check(1300, 115)).toMatch(/^ {2}MET /);
    expect(check(1299, 100)).toMatch(/^ {2}MISS/);
    expect(check(2000, 116)).toMatch(/^ {2}MISS/);
    expect(threadsTargetChecks([leg('kvroute-threads-1', 1000, 100)])).toEqual([]);
  });

  it.skipIf(!kvrouteServeAvailable())(
    'through kvroute serve (once built): ready line, nothing lost, exit 0',
    async () => {
      const kvroute = await startKvroute(stub.ports);
      let stopped = false;
      try {
        const r = await closedLoop(target(kvroute.port, false), { connections: 4, amount: 200 });
        expect(r).toMatchObject({ ok: 200, errors: 0 });
        const s = await openStreams(target(kvroute.port, true), {
          streams: 20,
          seconds: 0.2,
          chunks: CHUNKS,
          timeoutMs: 5000,
        });
        expect(s.firstError).toBeUndefined();
        expect(s.complete).toBeGreaterThanOrEqual(20);
        stopped = true;
        expect(await kvroute.stop()).toBeUndefined(); // SIGTERM → exit 0
      } finally {
        if (!stopped) await kvroute.stop();
      }
    },
  );
});
