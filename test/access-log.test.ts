/**
 * Request ids and the request log: every response carries `x-request-id` (the client's, else one
 * the proxy made and also sent upstream); `--access-log` writes exactly one JSON line per request,
 * the line's fields matching what happened; reopen() (SIGHUP) rotates without losing a line; a
 * path that cannot be opened is refused, naming it.
 */
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { formatRecord, openAccessLog } from '../src/proxy/observe/access-log.js';
import type { RequestRecord } from '../src/proxy/observe/proxy-observer.js';

import { MODEL, post, startFleetProxy, startProxy, startStub } from './helpers/proxy-harness.js';
import { serveFailure, startServe } from './helpers/proxy-serve-child.js';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-access-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const lines = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const chat = (content: string, stream = false) => ({
  model: MODEL,
  messages: [{ role: 'user', content }],
  max_tokens: 3,
  ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
});

describe('x-request-id', () => {
  it('is made when the client sends none, sent upstream and back; a client one is kept', async () => {
    const upstream = await startStub((_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"choices":[]}'),
    );
    const rig = await startProxy({ backends: [upstream.url] });
    try {
      const made = await post(rig.base, '/v1/chat/completions', chat('hi'));
      await made.text();
      const id = made.headers.get('x-request-id');
      expect(id).toMatch(UUID);
      expect(upstream.requests[0]!.headers['x-request-id']).toBe(id);
      const kept = await post(rig.base, '/v1/chat/completions', chat('hi'), { 'x-request-id': 'client-req-7' });
      await kept.text();
      expect(kept.headers.get('x-request-id')).toBe('client-req-7');
      expect(upstream.requests[1]!.headers['x-request-id']).toBe('client-req-7');
      const refused = await post(rig.base, '/v1/chat/completions', '{"model": ');
      expect(refused.status).toBe(400);
      expect(refused.headers.get('x-request-id')).toMatch(UUID); // errors carry one too
      await refused.text();
    } finally {
      await rig.close();
      await upstream.close();
    }
  });

  it('is not doubled when the engine echoes it', async () => {
    const upstream = await startStub((req, res) =>
      res
        .writeHead(200, { 'content-type': 'application/json', 'x-request-id': String(req.headers['x-request-id']) })
        .end('{"choices":[]}'),
    );
    const rig = await startProxy({ backends: [upstream.url] });
    try {
      const response = await post(rig.base, '/v1/chat/completions', chat('hi'), { 'x-request-id': 'echoed-1' });
      await response.text();
      expect(response.headers.get('x-request-id')).toBe('echoed-1'); // fetch would join two as "a, b"
    } finally {
      await rig.close();
      await upstream.close();
    }
  });
});

describe('the request log', () => {
  it('writes one line per request, fields matching what happened', async () => {
    const path = join(dir, 'requests.log');
    const log = await openAccessLog(path);
    const rig = await startFleetProxy(2, { observers: [log.observer] });
    const ids: string[] = [];
    try {
      for (let i = 0; i < 6; i++) {
        const response = await post(rig.base, '/v1/chat/completions', chat(`request ${i}`, i % 2 === 1), {
          'x-session-id': `s${i % 3}`,
        });
        expect(response.status).toBe(200);
        await response.text();
        ids.push(response.headers.get('x-request-id')!);
      }
      const bad = await post(rig.base, '/v1/completions', { model: MODEL }, { 'x-request-id': 'bad-1' });
      expect(bad.status).toBe(400);
      await bad.text();
    } finally {
      await rig.close();
      await rig.fleet.close();
      await log.close();
    }
    const logged = lines(path);
    expect(logged).toHaveLength(7);
    expect(logged.slice(0, 6).map((l) => l.request_id)).toEqual(ids);
    for (const [i, line] of logged.slice(0, 6).entries()) {
      expect(line).toMatchObject({
        path: '/v1/chat/completions',
        status: 200,
        outcome: 'success',
        model: MODEL,
        instance: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/),
        reason: expect.any(String),
        session: `s${i % 3}`,
        stream: i % 2 === 1,
        attempts: 1,
        prompt_tokens: expect.any(Number),
        cached_tokens: expect.any(Number),
      });
      expect(Date.parse(line.time as string)).toBeGreaterThan(Date.now() - 60_000);
      expect(line.ttft_ms as number).toBeGreaterThan(0);
      expect(line.e2e_ms as number).toBeGreaterThanOrEqual(line.ttft_ms as number);
    }
    // Never routed: no instance, reason, stream or usage, and attempts 0.
    expect(logged[6]).toEqual({
      time: expect.any(String),
      request_id: 'bad-1',
      path: '/v1/completions',
      status: 400,
      outcome: 'error',
      error: 'missing_field: prompt is required: the text (or token ids) to complete',
      attempts: 0,
      e2e_ms: expect.any(Number),
    });
  });

  it('reopens for log rotation without losing a line, and stops at close', async () => {
    const path = join(dir, 'rotated.log');
    const log = await openAccessLog(path);
    const record = (n: number): RequestRecord => ({
      startedAt: Date.now(),
      requestId: `r${n}`,
      path: '/p',
      status: 200,
      outcome: 'success',
      attempts: 1,
      e2eMs: n,
    });
    for (let n = 0; n < 500; n++) log.observer.onRequest!(record(n));
    renameSync(path, `${path}.1`); // what logrotate does, then it sends SIGHUP
    for (let n = 500; n < 600; n++) log.observer.onRequest!(record(n)); // still into the renamed file
    await log.reopen();
    for (let n = 600; n < 700; n++) log.observer.onRequest!(record(n));
    await log.close();
    log.observer.onRequest!(record(700)); // after close: not logged
    const old = lines(`${path}.1`).map((l) => l.request_id);
    const fresh = lines(path).map((l) => l.request_id);
    expect(old).toEqual(Array.from({ length: 600 }, (_, n) => `r${n}`));
    expect(fresh).toEqual(Array.from({ length: 100 }, (_, n) => `r${600 + n}`));
    expect(log.dropped).toBe(0);
  });

  it('formats a line with only the keys the proxy knows', () => {
    const line = formatRecord({
      startedAt: Date.UTC(2026, 10, 30),
      requestId: 'x',
      path: '/v1/completions',
      status: 503,
      outcome: 'error',
      error: 'no_healthy_backend: no healthy backend can take the request; retry shortly',
      attempts: 0,
      e2eMs: 0.12345,
    });
    expect(line).toBe(
      '{"time":"2026-11-30T00:00:00.000Z","request_id":"x","path":"/v1/completions","status":503,"outcome":"error",' +
        '"error":"no_healthy_backend: no healthy backend can take the request; retry shortly","attempts":0,"e2e_ms":0.123}\n',
    );
  });

  it('refuses a path it cannot open, naming it', async () => {
    const missing = join(dir, 'no-such-dir', 'requests.log');
    await expect(openAccessLog(missing)).rejects.toThrow(`cannot open the access log ${missing}: ENOENT`);
    const failure = await serveFailure(['--access-log', missing, '--backends', 'http://127.0.0.1:9']);
    expect(failure.code).toBe(2);
    expect(failure.stderr).toMatch(/--access-log: cannot open the access log .*no-such-dir.*ENOENT/);
    expect(existsSync(join(dir, 'no-such-dir'))).toBe(false);
  });

  it('kvroute serve --access-log -: the lines follow the listening line on stdout (a pipe)', async () => {
    const serve = await startServe(['--port', '0', '--access-log', '-']);
    try {
      const response = await post(serve.base, '/v1/completions', { model: MODEL, prompt: 'hi', max_tokens: 2 });
      expect(response.status).toBe(200);
      const id = response.headers.get('x-request-id');
      await response.text();
      expect(await serve.stop()).toBe(0);
      const out = serve.stdout().split('\n');
      expect(out[0]).toMatch(/^kvroute serve: listening on http:/);
      expect(JSON.parse(out[1]!)).toMatchObject({ request_id: id, path: '/v1/completions', status: 200 });
    } finally {
      await serve.stop();
    }
  });

  it('kvroute serve --access-log: a line per request, the one in flight at SIGTERM included', async () => {
    const path = join(dir, 'serve.log');
    const serve = await startServe(['--port', '0', '--access-log', path]);
    try {
      for (let i = 0; i < 4; i++) {
        const response = await post(serve.base, '/v1/chat/completions', chat(`served ${i}`));
        expect(response.status).toBe(200);
        await response.text();
      }
      // A stream still generating when SIGTERM arrives finishes within the grace period, logged.
      const response = await post(serve.base, '/v1/chat/completions', { ...chat('a long one', true), max_tokens: 40 });
      const reader = response.body!.getReader();
      await reader.read();
      const stopping = serve.stop();
      while (!(await reader.read()).done);
      expect(await stopping).toBe(0);
    } finally {
      await serve.stop();
    }
    const logged = lines(path);
    expect(logged.map((l) => l.status)).toEqual([200, 200, 200, 200, 200]);
    expect(logged[4]).toMatchObject({ stream: true, prompt_tokens: expect.any(Number) });
  });
});
