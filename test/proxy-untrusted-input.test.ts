/**
 * What the proxy says back about what a client sent, and what it says of its backends:
 *
 * - client values (a model name, a header value, a path, a session id, a policy key) are quoted
 *   capped (echo()) in error bodies and in the access log, so a 4 MB model name gets a short 404
 *   and a short log line;
 * - client error bodies name a backend by its name (backend-…, listed by /admin/state), never by
 *   its URL, while the access log keeps the URL;
 * - the admin API refuses an unknown policy key with 400 naming it and the known ones, and a body
 *   over its limit with 413 stating the limit.
 *
 * Both server modes (uWS and node:http) run every case.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { backendName, withoutAddresses } from '../src/proxy/exchange/upstream-errors.js';
import { openAccessLog } from '../src/proxy/observe/access-log.js';
import { adminMount, MAX_ADMIN_BODY } from '../src/proxy/observe/admin-api.js';
import { echo, ECHO_CHARS } from '../src/proxy/server/error-body.js';
import { MODEL, post, scopedRigs } from './helpers/proxy-harness.js';

const rigs = scopedRigs();
afterEach(() => rigs.closeAll());

const TOKEN = 'untrusted-input-token';
type ErrorReply = { error: { code: string | null; message: string } };

describe('echo()', () => {
  it('keeps short values, cuts long ones to ECHO_CHARS and states their size in UTF-8 bytes', () => {
    expect(echo('qwen3')).toBe('qwen3');
    const long = 'é'.repeat(ECHO_CHARS + 50);
    expect(echo(long)).toBe(`${'é'.repeat(ECHO_CHARS)}… (${2 * (ECHO_CHARS + 50)} bytes)`);
    // Never ends on half a surrogate pair.
    const emoji = `${'a'.repeat(ECHO_CHARS - 1)}😀😀`;
    expect(echo(emoji)).toBe(`${'a'.repeat(ECHO_CHARS - 1)}… (${ECHO_CHARS - 1 + 8} bytes)`);
  });
});

describe("a backend's name in client messages", () => {
  it('is stable, not the URL, and every address in an error text becomes it', () => {
    const id = 'http://10.1.2.3:8000';
    const name = backendName(id);
    expect(name).toMatch(/^backend-[0-9a-f]{8}$/);
    expect(backendName(id)).toBe(name);
    expect(backendName('http://10.1.2.4:8000')).not.toBe(name);
    expect(withoutAddresses('connect ECONNREFUSED 10.1.2.3:8000', id, name)).toBe(`connect ECONNREFUSED ${name}`);
    expect(
      withoutAddresses('Connect Timeout Error (attempted address: 10.1.2.3:8000, timeout: 10000ms)', id, name),
    ).toBe(`Connect Timeout Error (attempted address: ${name}, timeout: 10000ms)`);
    expect(withoutAddresses('connect ECONNREFUSED ::1:8000 via http://engine-3.internal/v1', id, name)).toBe(
      `connect ECONNREFUSED ${name} via ${name}`,
    );
    const host = 'http://engine-7.internal:8000';
    expect(withoutAddresses('getaddrinfo ENOTFOUND engine-7.internal', host, backendName(host))).toBe(
      `getaddrinfo ENOTFOUND ${backendName(host)}`,
    );
    expect(withoutAddresses('other side closed', id, name)).toBe('other side closed');
  });
});

describe.each(['uws', 'node'] as const)('untrusted input (%s server)', (http) => {
  const withLog = async (backends: string[], retries = 2) => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-echo-'));
    const path = join(dir, 'access.log');
    const log = await openAccessLog(path);
    rigs.add(async () => rmSync(dir, { recursive: true, force: true }));
    const rig = await rigs.proxyFor({
      backends,
      http,
      retries,
      observers: [log.observer],
      mounts: [adminMount(TOKEN)],
    });
    /** The log's lines once it is closed. */
    const lines = async () => {
      await log.close();
      return readFileSync(path, 'utf8').trimEnd().split('\n');
    };
    return { rig, lines };
  };
  const ok = () => rigs.stub((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));

  it('a 4 MB model name gets a short 404, and a short access log line', async () => {
    const upstream = await ok();
    const { rig, lines } = await withLog([upstream.url]);
    const model = `m${'x'.repeat(4 * 2 ** 20)}`;
    const session = 's'.repeat(3000);
    const response = await post(
      rig.base,
      '/v1/chat/completions',
      { model, messages: [{ role: 'user', content: 'hi' }] },
      { 'x-session-id': session },
    );
    expect(response.status).toBe(404);
    const text = await response.text();
    expect(text.length).toBeLessThan(1024);
    expect((JSON.parse(text) as ErrorReply).error.message).toContain(
      `${model.slice(0, ECHO_CHARS)}… (${model.length} bytes)`,
    );
    const [line] = await lines();
    expect(line!.length).toBeLessThan(2048);
    const logged = JSON.parse(line!) as Record<string, string>;
    expect(logged.model).toBe(echo(model));
    expect(logged.session).toBe(echo(session));
    expect(logged.error).toMatch(/^model_not_found: /);
  });

  it('long header values, paths and model ids are quoted capped', async () => {
    const upstream = await ok();
    const { rig } = await withLog([upstream.url]);
    const coding = 'z'.repeat(3000);
    const refused = await post(rig.base, '/v1/chat/completions', { model: MODEL }, { 'content-encoding': coding });
    expect(refused.status).toBe(415);
    expect((await refused.text()).length).toBeLessThan(1024);
    const path = `/nowhere/${'p'.repeat(3000)}`;
    const missing = await fetch(`${rig.base}${path}`);
    expect(missing.status).toBe(404);
    const message = ((await missing.json()) as ErrorReply).error.message;
    expect(message).toContain(`${path.slice(0, ECHO_CHARS)}… (${path.length} bytes)`);
    const card = await fetch(`${rig.base}/v1/models/${'q'.repeat(3000)}`);
    expect(card.status).toBe(404);
    expect((await card.text()).length).toBeLessThan(1024);
  });

  it("a failed upstream is named by its backend's name in the client's body, by its URL in the log", async () => {
    const upstream = await rigs.stub((req) => req.socket.destroy());
    const { rig, lines } = await withLog([upstream.url], 0); // no retry: the breaker opens at the reset
    const response = await post(rig.base, '/v1/chat/completions', {
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(response.status).toBe(502);
    const message = ((await response.json()) as ErrorReply).error.message;
    const name = backendName(upstream.url);
    expect(message).toMatch(new RegExp(`^upstream ${name} failed before responding \\(reset: `));
    expect(message).not.toContain('127.0.0.1');
    expect(message).not.toContain(new URL(upstream.url).port);
    const state = await fetch(`${rig.base}/admin/state`, { headers: { authorization: `Bearer ${TOKEN}` } });
    const { backends } = (await state.json()) as { backends: Array<{ id: string; name: string }> };
    expect(backends).toEqual([expect.objectContaining({ id: upstream.url, name })]);
    const [line] = await lines();
    expect((JSON.parse(line!) as { error: string }).error).toContain(
      `upstream ${upstream.url} failed before responding`,
    );
  });

  it("mid-response: the client's 502 names the backend, not its URL", async () => {
    const upstream = await rigs.stub((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"partial":');
      setImmediate(() => res.socket?.destroy());
    });
    const { rig } = await withLog([upstream.url]);
    const response = await post(rig.base, '/v1/chat/completions', {
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
    });
    expect(response.status).toBe(502);
    const reply = (await response.json()) as ErrorReply;
    expect(reply.error.code).toBe('upstream_interrupted');
    expect(reply.error.message).toMatch(new RegExp(`^upstream ${backendName(upstream.url)} failed mid-response`));
    expect(reply.error.message).not.toContain('127.0.0.1');
  });

  it('the admin API: an unknown policy key is 400 naming it and the known ones; an oversized body is 413', async () => {
    const upstream = await ok();
    const { rig } = await withLog([upstream.url]);
    const admin = (path: string, body: string) =>
      fetch(`${rig.base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
        body,
      });
    const bogus = await admin('/admin/policy', JSON.stringify({ policy: { name: 'sticky', bogusKey: 1 } }));
    expect(bogus.status).toBe(400);
    const message = ((await bogus.json()) as ErrorReply).error.message;
    expect(message).toMatch(/unknown key "bogusKey"; known: name, offload, affinityThreshold, /);
    expect(message).toContain('ringFirstTurn');
    const policy = await fetch(`${rig.base}/admin/policy`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(((await policy.json()) as { policy: { name: string } }).policy.name).toBe('min_ttft'); // unchanged
    const longKey = await admin('/admin/policy', JSON.stringify({ policy: { name: 'sticky', ['k'.repeat(5000)]: 1 } }));
    expect(longKey.status).toBe(400);
    expect((await longKey.text()).length).toBeLessThan(2048);
    const tuned = await admin('/admin/policy', JSON.stringify({ policy: { name: 'min_ttft', kvWeight: 3 } }));
    expect(tuned.status).toBe(200);
    await tuned.text();

    const big = await admin(
      '/admin/instances/add',
      JSON.stringify({ url: 'http://127.0.0.1:9', pad: 'x'.repeat(70_000) }),
    );
    expect(big.status).toBe(413);
    expect(((await big.json()) as ErrorReply).error.message).toBe(
      `the admin request body is over its limit of ${MAX_ADMIN_BODY} bytes`,
    );
    const after = await fetch(`${rig.base}/admin/state`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(((await after.json()) as { backends: unknown[] }).backends).toHaveLength(1); // nothing was added
  });
});
