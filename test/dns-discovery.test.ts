/**
 * Backends from DNS, end to end: a DNS server in this test (UDP, dns-packet) answers for a name
 * whose records it changes; `sim serve` engines listen on loopback addresses 127.0.0.2… at one
 * port, as pods behind a headless Service do. The proxy starts with no backends and
 * `dns:NAME:PORT`:
 * - the first answer's engines take requests once started;
 * - an engine added to DNS takes traffic within one interval plus one health probe;
 * - an engine removed from DNS gets no new request after the next resolution, and its request in
 *   flight finishes;
 * - a failing DNS server keeps the fleet (with a warning); an empty answer empties it;
 * - `dns-srv:NAME` takes SRV records' targets and ports.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { parseDiscoverSpec } from '../src/proxy/upstream/dns-discovery.js';
import { createProxy } from '../src/proxy/server/proxy-server.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { MODEL } from './helpers/proxy-harness.js';
import { portFreeOn, TestDns } from './helpers/test-dns.js';
import { waitFor } from './helpers/wait-for.js';

const HOSTS = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];
const NAME = 'engines.fleet.test';
let dns: TestDns;
let port: number;
let engines: SimFleet[];
const url = (host: string) => `http://${host}:${port}`;

beforeAll(async () => {
  dns = await TestDns.start();
  port = await portFreeOn(HOSTS);
  engines = [];
  for (const host of HOSTS) engines.push(await startSimFleet({ instances: 1, port, host, speed: 20, model: MODEL }));
}, 30_000);
afterAll(async () => {
  for (const fleet of engines ?? []) await fleet.close();
  dns?.close();
});

async function chat(base: string, maxTokens = 2, stream = false): Promise<{ instance: string; body: string }> {
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: maxTokens, stream }),
  });
  expect(response.status).toBe(200);
  return { instance: response.headers.get('x-kvroute-instance')!, body: await response.text() };
}

describe('DNS discovery', () => {
  it('follows the name: added engines take traffic after one interval and a probe, removed ones finish in flight', async () => {
    dns.a.set(NAME, [HOSTS[0]!, HOSTS[1]!]);
    const warnings: string[] = [];
    const proxy = createProxy({
      backends: [],
      policy: 'round_robin',
      discovery: { spec: `dns:${NAME}:${port}`, intervalMs: 300, servers: [dns.server] },
      healthIntervalMs: 200,
      onWarning: (w) => warnings.push(w),
    });
    const { port: proxyPort } = await proxy.listen(0, '127.0.0.1');
    const base = `http://127.0.0.1:${proxyPort}`;
    try {
      expect(
        proxy.state
          .list()
          .map((b) => b.id)
          .sort(),
      ).toEqual([url(HOSTS[0]!), url(HOSTS[1]!)]);
      const first = new Set<string>();
      for (let i = 0; i < 4; i++) first.add((await chat(base)).instance);
      expect([...first].sort()).toEqual([url(HOSTS[0]!), url(HOSTS[1]!)]);

      // Added: within one interval (300 ms) and one health probe (~a round trip).
      const addedAt = performance.now();
      dns.a.set(NAME, [HOSTS[0]!, HOSTS[1]!, HOSTS[2]!]);
      await waitFor('the added engine to take a request', async () => {
        for (let i = 0; i < 3; i++) if ((await chat(base)).instance === url(HOSTS[2]!)) return true;
        return false;
      });
      const tookMs = performance.now() - addedAt;
      expect(tookMs).toBeLessThan(300 + 200 + 1000); // interval + probe, with room for a loaded machine
      expect(warnings.join('\n')).toContain(`discovery added backend ${url(HOSTS[2]!)}`);

      // Removed while a long stream runs on it: the stream finishes; nothing new goes there.
      let streamOnRemoved: Promise<{ instance: string; body: string }> | undefined;
      for (let i = 0; i < 6 && streamOnRemoved === undefined; i++) {
        const pending = chat(base, 400, true);
        // round_robin: the request after two others lands on the same engine; find one on HOSTS[0].
        const placed = await waitForPlacement(proxy, url(HOSTS[0]!));
        if (placed) streamOnRemoved = pending;
        else await pending;
      }
      expect(streamOnRemoved).toBeDefined();
      dns.a.set(NAME, [HOSTS[1]!, HOSTS[2]!]);
      await waitFor('the removed engine to leave the proxy', () => proxy.state.backend(url(HOSTS[0]!)) === undefined);
      for (let i = 0; i < 6; i++) expect((await chat(base)).instance).not.toBe(url(HOSTS[0]!));
      const finished = await streamOnRemoved!;
      expect(finished.instance).toBe(url(HOSTS[0]!));
      expect(finished.body.trimEnd().endsWith('data: [DONE]')).toBe(true);
      expect((finished.body.match(/ tok/g) ?? []).length).toBe(400);

      // A broken DNS server keeps the fleet, and says so once.
      dns.failing = true;
      const queries = dns.queries;
      await waitFor('two more resolutions', () => dns.queries >= queries + 4);
      expect(proxy.state.list().length).toBe(2);
      expect(warnings.filter((w) => w.includes('resolving failed')).length).toBe(1);
      dns.failing = false;
      // An answer of no records is a fleet of none.
      dns.a.delete(NAME);
      await waitFor('the fleet to empty', () => proxy.state.list().length === 0);
      const refused = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }),
      });
      expect([404, 503]).toContain(refused.status);
    } finally {
      await proxy.close({ graceMs: 1000 });
    }
  }, 60_000);

  it('dns-srv:NAME takes the targets and ports of SRV records', async () => {
    const srvName = `_http._tcp.${NAME}`;
    dns.srv.set(srvName, [{ target: 'localhost', port: engines[0]!.engines[0]!.port }]);
    const proxy = createProxy({
      backends: [],
      discovery: { spec: `dns-srv:${srvName}`, intervalMs: 300, servers: [dns.server] },
      onWarning: () => {},
    });
    try {
      await proxy.started();
      expect(proxy.state.list().map((b) => b.id)).toEqual([`http://localhost:${port}`]);
    } finally {
      await proxy.close({ graceMs: 0 });
    }
  });

  it('refuses a malformed spec, naming what it takes', () => {
    expect(parseDiscoverSpec('dns:engines:8000')).toEqual({ kind: 'dns', name: 'engines', port: 8000 });
    expect(parseDiscoverSpec('dns-srv:_http._tcp.engines')).toEqual({ kind: 'dns-srv', name: '_http._tcp.engines' });
    for (const bad of ['dns:engines', 'dns:engines:0', 'dns:engines:70000', 'srv:x', 'dns-srv:', 'http://x'])
      expect(parseDiscoverSpec(bad)).toBeUndefined();
    expect(() => createProxy({ backends: [], discovery: { spec: 'dns:x' } })).toThrow(
      /options\.discovery\.spec must be dns:NAME:PORT \(A\/AAAA records\) or dns-srv:NAME/,
    );
    expect(() => createProxy({ backends: [] })).toThrow(/at least one backend URL \(or set options\.discovery\)/);
  });
});

/** Whether the proxy's latest routed request went to `instance` (read from its in-flight counts). */
async function waitForPlacement(proxy: ReturnType<typeof createProxy>, instance: string): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    const backend = proxy.state.backend(instance);
    if (backend !== undefined && backend.inFlight > 0) return true;
    const busy = proxy.state.list().some((b) => b.inFlight > 0);
    if (busy) return false;
    await new Promise((r) => setTimeout(r, 10));
  }
  return false;
}
