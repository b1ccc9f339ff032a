/**
 * The proxy as an HTTP server, in both server modes: an exclusive port, HEAD, 405 on the admin
 * API, and (in `http: 'node'` mode) an answer for every protocol edge that uWebSockets.js leaves
 * unanswered: HTTP/1.0, a Host-less HTTP/1.1 request, dozens of headers, an oversized head,
 * garbage.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { adminMount } from '../src/proxy/observe/admin-api.js';
import { createProxy } from '../src/proxy/server/proxy-server.js';
import { MODEL, post, startProxy, startStub, type ProxyRig, type StubUpstream } from './helpers/proxy-harness.js';
import { serveFailure, startServe } from './helpers/proxy-serve-child.js';
import { rawRequest } from './helpers/raw-http.js';

const OK = '{"id":"x","object":"text_completion","choices":[]}';
let upstream: StubUpstream;
beforeAll(async () => {
  upstream = await startStub((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(OK));
});
afterAll(async () => {
  await upstream?.close();
});

const completion = JSON.stringify({ model: MODEL, prompt: 'hi', max_tokens: 2 });

describe.each(['uws', 'node'] as const)('the %s server', (http) => {
  let rig: ProxyRig;
  let port: number;
  beforeAll(async () => {
    rig = await startProxy({ backends: [upstream.url], http, mounts: [adminMount('a-token-of-16-chars-or-more')] });
    port = Number(new URL(rig.base).port);
  });
  afterAll(async () => {
    await rig?.close();
  });

  it('takes its port exclusively: a second proxy on it fails with EADDRINUSE, in either mode', async () => {
    for (const other of ['uws', 'node'] as const) {
      const second = createProxy({ backends: [upstream.url], http: other, onWarning: () => {} });
      await expect(second.listen(port, '127.0.0.1')).rejects.toMatchObject({
        code: 'EADDRINUSE',
        message: `address in use: 127.0.0.1:${port} is taken by another process (another kvroute serve?)`,
      });
      await second.close({ graceMs: 0 });
    }
    expect((await fetch(`${rig.base}/health`)).status).toBe(200); // the first one still serves alone
  });

  it('answers HEAD on GET routes without a body, and 405 with Allow on a wrong method', async () => {
    for (const path of ['/health', '/ready', '/v1/models']) {
      const head = await rawRequest(port, `HEAD ${path} HTTP/1.1\r\nHost: x\r\n\r\n`);
      expect(head.status).toBe(200);
      expect(head.body).toBe('');
    }
    const viaFetch = await fetch(`${rig.base}/health`, { method: 'HEAD' });
    expect(viaFetch.status).toBe(200);
    const wrong = await fetch(`${rig.base}/health`, { method: 'POST' });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, HEAD');
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed');
  });

  it('the admin API answers 405 with Allow for a wrong method, before asking for a token', async () => {
    const cases: Array<[string, string, string]> = [
      ['DELETE', '/admin/state', 'GET, HEAD'],
      ['GET', '/admin/instances/drain', 'POST'],
      ['PUT', '/admin/policy', 'GET, HEAD, POST'],
    ];
    for (const [method, path, allow] of cases) {
      const response = await fetch(`${rig.base}${path}`, { method });
      expect(response.status, `${method} ${path}`).toBe(405);
      expect(response.headers.get('allow')).toBe(allow);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('method_not_allowed');
    }
    const authorized = await fetch(`${rig.base}/admin/policy`, {
      headers: { authorization: 'Bearer a-token-of-16-chars-or-more' },
    });
    expect(authorized.status).toBe(200);
  });

  it('serves the OpenAI routes to the openai client', async () => {
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'unused', maxRetries: 0 });
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
    expect((await post(rig.base, '/v1/completions', completion)).status).toBe(200);
  });
});

describe('the node server answers every protocol edge', () => {
  let rig: ProxyRig;
  let port: number;
  beforeAll(async () => {
    rig = await startProxy({ backends: [upstream.url], http: 'node' });
    port = Number(new URL(rig.base).port);
  });
  afterAll(async () => {
    await rig?.close();
  });

  it('HTTP/1.0: a health check and a completion are served, and the connection closes', async () => {
    const health = await rawRequest(port, 'GET /health HTTP/1.0\r\n\r\n');
    expect(health).toMatchObject({ status: 200, body: '{"status":"ok"}', closed: true });
    const served = await rawRequest(
      port,
      `POST /v1/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: ${completion.length}\r\n\r\n${completion}`,
    );
    expect(served).toMatchObject({ status: 200, body: OK, closed: true });
  });

  it('HTTP/1.1 without Host: 400 with a JSON body naming the header', async () => {
    const response = await rawRequest(port, 'GET /health HTTP/1.1\r\n\r\n');
    expect(response.status).toBe(400);
    expect(response.headers.connection).toBe('close');
    expect(response.headers['content-type']).toBe('application/json');
    expect(JSON.parse(response.body)).toMatchObject({
      error: { code: 'bad_request', message: 'an HTTP/1.1 request must carry a Host header' },
    });
  });

  it('60 custom headers are served; the openai client with 32 extra default headers works', async () => {
    const many = Array.from({ length: 60 }, (_, i) => `X-Custom-${i}: value-${i}\r\n`).join('');
    const response = await rawRequest(
      port,
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\n${many}Content-Type: application/json\r\nContent-Length: ${completion.length}\r\n\r\n${completion}`,
    );
    expect(response.status).toBe(200);
    const headers = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`x-extra-${i}`, `v${i}`]));
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'k', maxRetries: 0, defaultHeaders: headers });
    const reply = await client.completions.create({ model: MODEL, prompt: 'hi', max_tokens: 2 });
    expect(reply.object).toBe('text_completion');
    expect(upstream.requests.at(-1)!.headers['x-extra-31']).toBe('v31');
  });

  it('an oversized head: 431 with a JSON body; another major version: 505; garbage: 400', async () => {
    const big = await rawRequest(port, `GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(big).toMatchObject({ status: 431, headers: { connection: 'close' } });
    expect(JSON.parse(big.body).error.code).toBe('headers_too_large');
    const v2 = await rawRequest(port, 'GET /health HTTP/2.0\r\nHost: x\r\n\r\n');
    expect(v2.status).toBe(505);
    expect(JSON.parse(v2.body).error.code).toBe('unsupported_protocol');
    const garbage = await rawRequest(port, 'GARBAGE\r\n\r\n');
    expect(garbage).toMatchObject({ status: 400, headers: { connection: 'close' } });
    expect(JSON.parse(garbage.body).error.code).toBe('bad_request');
    expect((await fetch(`${rig.base}/health`)).status).toBe(200);
  });
});

describe('kvroute serve on a port in use', () => {
  it('fails at once with "address in use", exit 2, in either server mode', async () => {
    const first = await startServe(['--port', '0', '--backends', upstream.url]);
    try {
      const { port } = new URL(first.base);
      for (const http of ['uws', 'node']) {
        const second = await serveFailure(['--port', port, '--backends', upstream.url, '--http', http]);
        expect(second.code).toBe(2);
        expect(second.stderr).toMatch(`address in use: 127.0.0.1:${port} is taken by another process`);
      }
    } finally {
      expect(await first.stop()).toBe(0);
    }
  });
});
