/**
 * What the proxy does with bad or hostile input, and what it forwards: OpenAI-style errors for
 * malformed JSON, missing fields, bodies over --max-body (by content-length and by counting a
 * chunked body), unknown routes and wrong methods, no routable backend (503 + Retry-After);
 * hop-by-hop and spoofed x-kvroute-* headers dropped; the original bytes forwarded unless
 * --strip-extensions has a field to remove; routing inputs (session header, `user`, hash_ids).
 */
import { connect } from 'node:net';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { relayedResponseHeaders } from '../src/proxy/exchange/forward-headers.js';
import { resolveProxyOptions } from '../src/proxy/proxy-options.js';

import { MODEL, post, startProxy, startStub, type ProxyRig, type StubUpstream } from './helpers/proxy-harness.js';

let upstream: StubUpstream;
let rig: ProxyRig;
const OK_BODY = '{"id":"x","object":"chat.completion","choices":[],"usage":{"prompt_tokens":3,"total_tokens":3}}';

beforeAll(async () => {
  upstream = await startStub((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(OK_BODY));
  rig = await startProxy({ backends: [upstream.url], maxBodyBytes: 4096 });
});
afterAll(async () => {
  await rig?.close();
  await upstream?.close();
});

async function expectError(response: Response, status: number, code: string, param: string | null = null) {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toBe('application/json');
  const body = (await response.json()) as { error: { message: string } };
  expect(body).toEqual({
    error: { message: expect.any(String), type: expect.stringMatching(/_error$/), param, code },
  });
  return body.error.message as string;
}

describe('proxy: bad input gets OpenAI-style errors', () => {
  it('malformed JSON, a non-object body → 400', async () => {
    expect(await expectError(await post(rig.base, '/v1/chat/completions', '{"model": '), 400, 'invalid_json')).toMatch(
      /not valid JSON/,
    );
    await expectError(await post(rig.base, '/v1/chat/completions', '[1,2]'), 400, 'invalid_json');
    await expectError(await post(rig.base, '/v1/completions', ''), 400, 'invalid_json');
  });

  it('missing model, messages or prompt → 400 naming the field', async () => {
    await expectError(await post(rig.base, '/v1/chat/completions', { messages: [] }), 400, 'missing_field', 'model');
    await expectError(await post(rig.base, '/v1/chat/completions', { model: MODEL }), 400, 'missing_field', 'messages');
    await expectError(await post(rig.base, '/v1/completions', { model: MODEL }), 400, 'missing_field', 'prompt');
    await expectError(
      await post(rig.base, '/v1/chat/completions', { model: MODEL, messages: 'hi' }),
      400,
      'invalid_field',
      'messages',
    );
    await expectError(
      await post(rig.base, '/v1/chat/completions', { model: MODEL, messages: [], hash_ids: [1, -2] }),
      400,
      'invalid_field',
      'hash_ids',
    );
    // A message the router cannot hash is the client's mistake too, named up front.
    expect(
      await expectError(
        await post(rig.base, '/v1/chat/completions', { model: MODEL, messages: [42] }),
        400,
        'invalid_field',
        'messages',
      ),
    ).toBe('messages[0] must be an object, got 42');
    expect(upstream.requests).toHaveLength(0);
  });

  it('a body over --max-body → 413, by content-length and by counting a chunked body', async () => {
    const big = JSON.stringify({ model: MODEL, prompt: 'x'.repeat(5000) });
    await expectError(await post(rig.base, '/v1/completions', big), 413, 'body_too_large');
    const chunked = await fetch(`${rig.base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < 8; i++) controller.enqueue(new TextEncoder().encode(big.slice(i * 700, (i + 1) * 700)));
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    await expectError(chunked, 413, 'body_too_large');
    expect(upstream.requests).toHaveLength(0);
  });

  it('unknown route → 404, wrong method → 405 with Allow', async () => {
    await expectError(await fetch(`${rig.base}/v1/embeddings`, { method: 'POST' }), 404, 'not_found');
    await expectError(await fetch(`${rig.base}/nope`), 404, 'not_found');
    const wrong = await fetch(`${rig.base}/v1/chat/completions`);
    expect(wrong.headers.get('allow')).toBe('POST');
    await expectError(wrong, 405, 'method_not_allowed');
    const models = await fetch(`${rig.base}/v1/models`, { method: 'DELETE' });
    expect(models.headers.get('allow')).toBe('GET, HEAD');
    await expectError(models, 405, 'method_not_allowed');
  });

  it('garbage on the socket does not crash the process', async () => {
    const { port } = new URL(rig.base);
    for (const junk of [
      'GARBAGE\r\n\r\n',
      'POST /v1/completions HTTP/1.1\r\nContent-Length: 5\r\n\r\n{"a"',
      '\x00\x01\x02',
    ]) {
      const socket = connect(Number(port), '127.0.0.1');
      socket.on('error', () => {});
      socket.end(junk);
      await new Promise((resolve) => socket.once('close', resolve));
    }
    expect((await fetch(`${rig.base}/health`)).status).toBe(200);
  });

  it('no routable backend → 503 with Retry-After', async () => {
    const other = await startProxy({ backends: [upstream.url, 'http://127.0.0.1:9/'] });
    try {
      other.proxy.state.drainBackend(upstream.url);
      other.proxy.state.drainBackend('http://127.0.0.1:9');
      const response = await post(other.base, '/v1/chat/completions', { model: MODEL, messages: [] });
      expect(response.headers.get('retry-after')).toBe('1');
      await expectError(response, 503, 'no_healthy_backend');
      expect((await fetch(`${other.base}/ready`)).status).toBe(503);
      const models = await fetch(`${other.base}/v1/models`);
      expect(models.status).toBe(503);
    } finally {
      await other.close();
    }
  });
});

describe('proxy: what is forwarded', () => {
  it('drops hop-by-hop and spoofed x-kvroute-* headers; sets its own', async () => {
    const before = upstream.requests.length;
    const response = await post(
      rig.base,
      '/v1/chat/completions',
      { model: MODEL, messages: [{ role: 'user', content: 'hi' }] },
      {
        'x-kvroute-instance': 'http://evil.example',
        'x-kvroute-anything': '1',
        'proxy-authorization': 'secret',
        authorization: 'Bearer engine-key',
        'x-custom': 'kept',
        te: 'trailers',
      },
    );
    expect(response.status).toBe(200);
    expect(response.headers.get('x-kvroute-instance')).toBe(upstream.url);
    expect(await response.text()).toBe(OK_BODY);
    const seen = upstream.requests[before]!.headers;
    expect(seen['x-kvroute-instance']).toBeUndefined();
    expect(seen['x-kvroute-anything']).toBeUndefined();
    expect(seen['proxy-authorization']).toBeUndefined();
    expect(seen.te).toBeUndefined();
    expect(seen.authorization).toBe('Bearer engine-key');
    expect(seen['x-custom']).toBe('kept');
    expect(seen.host).toBe(new URL(upstream.url).host);
    expect(upstream.requests[before]!.url).toBe('/v1/chat/completions');
  });

  it('forwards the original bytes, and strips hash_ids only with --strip-extensions', async () => {
    const raw = `{ "model" : "${MODEL}",  "prompt":"hi",\n "hash_ids": [1, 2, 3] }`;
    const before = upstream.requests.length;
    expect((await post(rig.base, '/v1/completions?x=1', raw)).status).toBe(200);
    expect(upstream.requests[before]!.body.toString()).toBe(raw);
    expect(upstream.requests[before]!.url).toBe('/v1/completions?x=1');

    const stripping = await startProxy({ backends: [upstream.url], stripExtensions: true });
    try {
      expect((await post(stripping.base, '/v1/completions', raw)).status).toBe(200);
      expect(JSON.parse(upstream.requests.at(-1)!.body.toString())).toEqual({ model: MODEL, prompt: 'hi' });
      const plain = `{"model":"${MODEL}", "prompt":"no extensions"}`;
      expect((await post(stripping.base, '/v1/completions', plain)).status).toBe(200);
      expect(upstream.requests.at(-1)!.body.toString()).toBe(plain);
    } finally {
      await stripping.close();
    }
  });

  it('GET /v1/models: the union of the backends’ lists, deduplicated by id, from discovery', async () => {
    const a = await startStub(() => {}, 0, { models: ['m1', 'shared'] });
    const b = await startStub(() => {}, 0, { models: ['shared', 'm2'] });
    const merged = await startProxy({ backends: [a.url, b.url] });
    try {
      const response = await fetch(`${merged.base}/v1/models`);
      expect(response.status).toBe(200);
      const body = (await response.json()) as { object: string; data: Array<{ id: string; owned_by: string }> };
      expect(body.object).toBe('list');
      expect(body.data.map((m) => m.id)).toEqual(['m1', 'shared', 'm2']);
      expect(body.data.every((m) => m.owned_by === 'stub')).toBe(true); // the engines' own cards
      expect(a.requests).toEqual([]); // answered by the proxy, not asked of the engines per request
    } finally {
      await merged.close();
      await a.close();
      await b.close();
    }
  });

  it('an observer that throws is reported once and never fails a request', async () => {
    const broken = {
      onRouted(): void {
        throw new Error('metrics bug');
      },
    };
    const warnings: string[] = [];
    const guarded = await startProxy({
      backends: [upstream.url],
      observers: [broken],
      onWarning: (m) => warnings.push(m),
    });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await post(guarded.base, '/v1/completions', { model: MODEL, prompt: 'p' });
        expect(r.status).toBe(200);
        await r.arrayBuffer();
      }
      expect(warnings.filter((w) => w.includes('metrics bug'))).toHaveLength(1);
      expect(guarded.observer.named('finished')).toHaveLength(3);
    } finally {
      await guarded.close();
    }
  });

  it('routes by the session header, else by `user`; the header wins', async () => {
    const second = await startStub((_req, res) => res.writeHead(200).end('{}'));
    const hashed = await startProxy({ backends: [upstream.url, second.url], policy: 'session_hash' });
    try {
      const where = async (headers: Record<string, string>, user?: string): Promise<string> => {
        const body = { model: MODEL, prompt: 'p', ...(user === undefined ? {} : { user }) };
        const r = await post(hashed.base, '/v1/completions', body, headers);
        await r.arrayBuffer();
        return r.headers.get('x-kvroute-instance')!;
      };
      const placed = new Map<string, string>();
      for (let s = 0; s < 16; s++) placed.set(`session-${s}`, await where({ 'x-session-id': `session-${s}` }));
      expect(new Set(placed.values()).size).toBe(2); // sessions spread over both
      for (const [session, instance] of placed) {
        expect(await where({ 'x-session-id': session })).toBe(instance);
        expect(await where({}, session)).toBe(instance);
      }
      const [s1, i1] = [...placed].find(([, i]) => i === upstream.url)!;
      const [s2] = [...placed].find(([, i]) => i !== upstream.url)!;
      expect(await where({ 'x-session-id': s1 }, s2)).toBe(i1);
      expect(hashed.observer.named('routed').every((e) => e[2] === 'session_hash')).toBe(true);
    } finally {
      await hashed.close();
      await second.close();
    }
  });

  it("takes an agent's session header when x-session-id is absent, in the list's order; the list is configurable", async () => {
    const second = await startStub((_req, res) => res.writeHead(200).end('{}'));
    const agents = await startProxy({ backends: [upstream.url, second.url], policy: 'session_hash' });
    const custom = await startProxy({
      backends: [upstream.url, second.url],
      policy: 'session_hash',
      agentSessionHeaders: ['X-My-Agent-Session', 'session_id'],
      // uWebSockets.js closes the connection on a header name with `_` (docs/proxy.md "Sessions").
      http: 'node',
    });
    try {
      const where = async (proxy: typeof agents, headers: Record<string, string>): Promise<string> => {
        const r = await post(proxy.base, '/v1/completions', { model: MODEL, prompt: 'p' }, headers);
        await r.arrayBuffer();
        return r.headers.get('x-kvroute-instance')!;
      };
      const sessions = Array.from({ length: 16 }, (_, s) => `agent-${s}`);
      const byId = new Map<string, string>();
      for (const s of sessions) byId.set(s, await where(agents, { 'x-session-id': s }));
      expect(new Set(byId.values()).size).toBe(2);
      for (const [s, instance] of byId) {
        // Each agent's header alone is the session, as x-session-id would be.
        for (const header of ['x-claude-code-session-id', 'session-id', 'x-opencode-session', 'x-qwen-code-session-id'])
          expect(await where(agents, { [header]: s })).toBe(instance);
        // x-session-id beats an agent's header; an earlier agent header beats a later one.
        const other = sessions.find((o) => byId.get(o) !== instance)!;
        expect(await where(agents, { 'x-session-id': s, 'x-claude-code-session-id': other })).toBe(instance);
        expect(await where(agents, { 'x-claude-code-session-id': s, 'session-id': other })).toBe(instance);
        // A configured list replaces the default one.
        expect(await where(custom, { 'x-my-agent-session': s })).toBe(instance);
        expect(await where(custom, { session_id: s })).toBe(instance);
      }
      // The custom list does not read the default's headers: the same prompt without a session
      // keys by its first block, so every such request lands on one instance.
      const unplaced = new Set<string>();
      for (const s of sessions) unplaced.add(await where(custom, { 'x-claude-code-session-id': s }));
      expect(unplaced.size).toBe(1);
      expect(() => resolveProxyOptions({ backends: [upstream.url], agentSessionHeaders: ['bad header'] })).toThrow(
        /options\.agentSessionHeaders\[0\] must be an HTTP header name/,
      );
    } finally {
      await agents.close();
      await custom.close();
      await second.close();
    }
  });
});

describe('relayed response headers', () => {
  it('drop hop-by-hop ones and those uWS writes itself, keep the rest', () => {
    const raw = [
      ['Content-Type', 'application/json'],
      ['Content-Length', '12'],
      ['uWebSockets', '20'],
      ['Date', 'Mon, 30 Nov 2026 07:00:00 GMT'],
      ['Connection', 'keep-alive'],
      ['X-Kvroute-Instance', 'spoofed'],
      ['x-request-id', 'abc'],
    ].flatMap(([name, value]) => [Buffer.from(name!), Buffer.from(value!)]);
    expect(relayedResponseHeaders(raw)).toEqual(['content-type', 'application/json', 'x-request-id', 'abc']);
  });
});
