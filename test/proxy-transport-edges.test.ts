/**
 * The proxy's HTTP edges over raw loopback sockets, in both server modes (docs/proxy.md "Server
 * modes"): request-smuggling shapes get 400 and forward nothing; a declared length over the body
 * limit gets 413 before the body is read, and one past uWS's parser (10 digits) closes the
 * connection in uWS mode while the process keeps serving; pipelined requests are answered in
 * order by the node server, and by uWS only while each is answered at once (a completion behind
 * them closes the connection). And `--http node`'s head timeout (`serve --header-timeout`) cuts a
 * slowloris client.
 */
import { connect } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { LINGER_MS } from '../src/proxy/server/lingering-close.js';
import { MODEL, startProxy, startStub, type ProxyRig, type StubUpstream } from './helpers/proxy-harness.js';
import { startServe } from './helpers/proxy-serve-child.js';
import { rawExchange } from './helpers/raw-exchange.js';

const OK = '{"id":"x","object":"text_completion","choices":[]}';
const completion = JSON.stringify({ model: MODEL, prompt: 'hi', max_tokens: 2 });
const post = (headers: string, body = completion) =>
  `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${headers}\r\n${body}`;
const chunked = (body: string) => `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
const errorCode = (body: string) => (JSON.parse(body) as { error: { code: string; message: string } }).error;

let upstream: StubUpstream;
beforeAll(async () => {
  upstream = await startStub((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(OK));
});
afterAll(async () => {
  await upstream?.close();
});

/** Polls until the proxy has no completion request open (bounded). */
async function settled(rig: ProxyRig): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (rig.proxy.state.openExchanges > 0) {
    if (Date.now() > deadline) throw new Error(`${rig.proxy.state.openExchanges} requests still open after 5 s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(['uws', 'node'] as const)('the %s server', (http) => {
  let rig: ProxyRig;
  let port: number;
  beforeAll(async () => {
    rig = await startProxy({ backends: [upstream.url], http });
    port = Number(new URL(rig.base).port);
  });
  afterAll(async () => {
    await rig?.close();
  });

  it('refuses conflicting or repeated Content-Length headers with 400, forwarding nothing', async () => {
    const before = upstream.requests.length;
    for (const lengths of [
      `Content-Length: ${completion.length}\r\nContent-Length: 5\r\n`,
      `Content-Length: ${completion.length}\r\nContent-Length: ${completion.length}\r\n`,
    ]) {
      const got = await rawExchange(port, post(lengths));
      expect(got.responses.map((r) => r.status)).toEqual([400]);
      expect(errorCode(got.responses[0]!.body).code).toBe('bad_request');
      expect(got.closed).toBe(true);
    }
    expect(upstream.requests.length).toBe(before);
  });

  it('refuses a Transfer-Encoding other than chunked alone with 400; chunked alone is served', async () => {
    const before = upstream.requests.length;
    for (const codings of [
      'Transfer-Encoding: chunked, identity\r\n',
      'Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n',
    ]) {
      const got = await rawExchange(port, post(codings, chunked(completion)), { responses: 1 });
      expect(
        got.responses.map((r) => r.status),
        codings,
      ).toEqual([400]);
      expect(errorCode(got.responses[0]!.body).code).toBe('bad_request');
    }
    expect(upstream.requests.length).toBe(before);
    const served = await rawExchange(port, post('Transfer-Encoding: chunked\r\n', chunked(completion)), {
      responses: 1,
    });
    expect(served.responses.map((r) => r.status)).toEqual([200]);
    expect(upstream.requests.length).toBe(before + 1);
  });

  it('never serves a request smuggled behind conflicting lengths', async () => {
    const before = upstream.requests.length;
    const smuggled = post(`Content-Length: ${completion.length}\r\n`);
    const got = await rawExchange(
      port,
      post(`Content-Length: 2\r\nContent-Length: ${2 + smuggled.length}\r\n`, `{}${smuggled}`),
    );
    // node answers 400; uWS closes the connection when it parses the smuggled request behind the
    // pending refusal (its pipelining rule), before the 400 is written.
    expect(got.responses.every((r) => r.status === 400)).toBe(true);
    expect(got.closed).toBe(true);
    expect(upstream.requests.length).toBe(before);
  });

  it('a declared length over --max-body gets 413 naming the limit, before the body is sent', async () => {
    // The body never comes: the proxy waits for it (lingering close) up to its time bound.
    const got = await rawExchange(port, post('Content-Length: 100000000\r\n', '{'), { timeoutMs: LINGER_MS + 2_000 });
    expect(got.responses.map((r) => r.status)).toEqual([413]);
    // Chunked (written before the body is drained), and cut at the bound before its last chunk.
    const body = got.rest; // the split reads no chunked body: it stays in `rest`
    expect(errorCode(body.slice(body.indexOf('{'), body.lastIndexOf('}') + 1))).toMatchObject({
      code: 'body_too_large',
      message: 'the request body exceeds --max-body (67108864 bytes)',
    });
    expect(got.closed).toBe(true);
  });

  it('Content-Length: 10000000000: node answers 413; uWS closes without a byte; the proxy keeps serving', async () => {
    const got = await rawExchange(port, post('Content-Length: 10000000000\r\n', '{'), {
      timeoutMs: LINGER_MS + 2_000,
    });
    expect(got.closed).toBe(true);
    if (http === 'node') expect(got.responses.map((r) => r.status)).toEqual([413]);
    else expect(got).toMatchObject({ responses: [], rest: '' });
    await settled(rig);
    const health = await rawExchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n', { responses: 1 });
    expect(health.responses.map((r) => r.status)).toEqual([200]);
  });

  it('pipelined requests answered at once are all answered, in order', async () => {
    const seven = Array.from({ length: 7 }, (_, i) => `GET /health?n=${i} HTTP/1.1\r\nHost: x\r\n\r\n`).join('');
    const got = await rawExchange(port, seven, { responses: 7 });
    expect(got.responses.map((r) => r.status)).toEqual(Array(7).fill(200));
  });

  it('7 pipelined completions: node answers all 7 in order; uWS closes the connection with none', async () => {
    const before = upstream.requests.length;
    const seven = Array.from({ length: 7 }, (_, i) =>
      post(`Content-Length: ${completion.length}\r\nX-Request-Id: pipelined-${i}\r\n`),
    ).join('');
    const got = await rawExchange(port, seven, { responses: 7, timeoutMs: 5_000 });
    if (http === 'node') {
      expect(got.responses.map((r) => r.status)).toEqual(Array(7).fill(200));
      expect(got.responses.map((r) => r.headers['x-request-id'])).toEqual(
        Array.from({ length: 7 }, (_, i) => `pipelined-${i}`),
      );
      expect(upstream.requests.length).toBe(before + 7);
    } else {
      expect(got).toMatchObject({ responses: [], rest: '', closed: true });
      // The first request's upstream call, if it started, was aborted with the connection.
      await settled(rig);
    }
    const health = await rawExchange(port, 'GET /health HTTP/1.1\r\nHost: x\r\n\r\n', { responses: 1 });
    expect(health.responses.map((r) => r.status)).toEqual([200]);
  });
});

describe('--http node: the request head timeout', () => {
  let rig: ProxyRig;
  let port: number;
  beforeAll(async () => {
    rig = await startProxy({ backends: [upstream.url], http: 'node', headerTimeoutMs: 300 });
    port = Number(new URL(rig.base).port);
  });
  afterAll(async () => {
    await rig?.close();
  });

  it('cuts a client trickling its head with 408, and leaves an idle keep-alive connection alone', async () => {
    // A keep-alive connection that has had one response, then stays idle while the slowloris runs.
    const idle = connect(port, '127.0.0.1');
    let idleData = '';
    idle.on('data', (c: Buffer) => (idleData += c.toString('latin1')));
    idle.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');

    const slow = connect(port, '127.0.0.1');
    const head = `GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(400)}\r\n\r\n`;
    let sent = 0;
    // One byte every 20 ms: the head would take 8 s; the bound below is 3 s.
    const trickle = setInterval(() => {
      if (sent < head.length && !slow.destroyed) slow.write(head[sent++]!);
    }, 20);
    let answer = '';
    slow.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    const t0 = performance.now();
    const closedIn = await new Promise<number>((resolve, reject) => {
      const bound = setTimeout(() => reject(new Error(`not cut within 3 s; got ${JSON.stringify(answer)}`)), 3_000);
      slow.on('close', () => {
        clearTimeout(bound);
        resolve(performance.now() - t0);
      });
    });
    clearInterval(trickle);
    expect(sent).toBeLessThan(head.length);
    expect(closedIn).toBeGreaterThanOrEqual(250);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(answer).toContain('"code":"request_timeout"');

    // The idle connection outlived the head timeout: its next request is served.
    expect(idle.destroyed).toBe(false);
    idle.write('GET /health HTTP/1.1\r\nHost: x\r\n\r\n');
    const deadline = Date.now() + 3_000;
    while ((idleData.match(/HTTP\/1\.1 200 /g) ?? []).length < 2) {
      if (Date.now() > deadline) throw new Error(`the idle connection's second answer: ${JSON.stringify(idleData)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    idle.destroy();
  });
});

describe('kvroute serve --header-timeout', () => {
  it('reaches the node server: an idle new connection gets 408 after it', async () => {
    const serve = await startServe([
      '--port',
      '0',
      '--backends',
      upstream.url,
      '--http',
      'node',
      '--header-timeout',
      '300',
    ]);
    try {
      // Nothing sent: the head's timeout runs from the connection's start.
      const got = await rawExchange(Number(new URL(serve.base).port), '', { timeoutMs: 3_000 });
      expect(got.responses.map((r) => r.status)).toEqual([408]);
      expect(got.closed).toBe(true);
      expect(got.ms).toBeGreaterThanOrEqual(250);
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  });
});
