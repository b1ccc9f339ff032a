/**
 * The load plane over a real nats-server (docs/scale-out.md, "One load plane over NATS"):
 * `kvroute serve --cluster` replicas as child processes in front of stub engines that hold their
 * answers. A replica's router counts its peers' in-flight requests and forgets them when the
 * peer is killed; a session placed by one replica is followed by another; a replica started while
 * NATS is down routes on its own view, says so in /ready and /metrics, and joins when NATS
 * comes; replicas resync after NATS restarts and after a partition heals; a replica stalled by
 * SIGSTOP (a slow consumer) catches up when it resumes. Skipped, saying so,
 * when nats-server is absent.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, Socket, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { freePort } from './helpers/loopback-port.js';
import { NATS_SKIP_REASON, natsServerPath, startNatsServer, type NatsServer } from './helpers/nats-server.js';
import { MODEL, startStub, type StubUpstream } from './helpers/proxy-harness.js';
import { startServe, type ServeChild } from './helpers/proxy-serve-child.js';

const binary = natsServerPath();
if (binary === undefined) console.warn(`test/cluster-load-plane.test.ts: ${NATS_SKIP_REASON}`);

const TOKEN = 'cluster-test-admin-token';
const dir = mkdtempSync(join(tmpdir(), 'kvroute-cluster-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Engines that hold every completion until release(). */
function holdingStub(): Promise<StubUpstream & { held(): number; release(): void }> {
  const waiting: Array<() => void> = [];
  return startStub((_req, res) => {
    waiting.push(() =>
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          id: 'x',
          object: 'chat.completion',
          model: MODEL,
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 48, completion_tokens: 1, total_tokens: 49 },
        }),
      ),
    );
  }).then((stub) =>
    Object.assign(stub, {
      held: () => waiting.length,
      release: () => waiting.splice(0).forEach((answer) => answer()),
    }),
  );
}

let configs = 0;
/** A replica of the fleet on `nats`, with a short TTL so tests see expiry within a second. */
function replica(nats: string, backends: string[], policy: string, name: string): Promise<ServeChild> {
  const config = join(dir, `replica-${configs++}.yaml`);
  writeFileSync(
    config,
    [
      'cluster:',
      `  nats: ${nats}`,
      '  fleet: test',
      `  replica: ${name}`,
      '  full_every_ms: 150',
      '  ttl_ms: 600',
      '',
    ].join('\n'),
  );
  return startServe([
    '--config',
    config,
    '--backends',
    backends.join(','),
    '--policy',
    policy,
    '--port',
    '0',
    '--admin-token',
    TOKEN,
    '--reconcile-interval',
    '0',
    '--health-interval',
    '200',
  ]);
}

async function adminState(
  base: string,
): Promise<{ router: { instances: Array<{ instance: string; effective: { waiting: number } }> } }> {
  const res = await fetch(`${base}/admin/state`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await res.json()) as never;
}

/** Waiting requests the replica's router sees per instance (its own and its peers'). */
async function seenWaiting(base: string): Promise<number> {
  const state = await adminState(base);
  return state.router.instances.reduce((sum, s) => sum + s.effective.waiting, 0);
}

async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, ms = 8000): Promise<T> {
  const deadline = Date.now() + ms;
  let last: T | undefined;
  while (Date.now() < deadline) {
    last = await read().catch(() => undefined as T);
    if (last !== undefined && ok(last)) return last;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what}: not within ${ms} ms (last: ${JSON.stringify(last)})`);
}

const chat = (base: string, session: string, ids: number[]) =>
  fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], hash_ids: ids, max_tokens: 1 }),
  });

interface ReadyBody {
  ready: boolean;
  cluster?: { connected: boolean; peers: string[]; replica: string; fleet: string };
}
const ready = async (base: string) => (await (await fetch(`${base}/ready`)).json()) as ReadyBody;

describe.skipIf(binary === undefined)('the load plane over NATS', () => {
  let nats: NatsServer;
  let stubs: Array<Awaited<ReturnType<typeof holdingStub>>>;
  const started: ServeChild[] = [];
  const serve = async (...args: Parameters<typeof replica>) => {
    const child = await replica(...args);
    started.push(child);
    await until(
      () => ready(child.base),
      (r) => r.ready === true,
      'its backends pass their first probe',
    );
    return child;
  };

  /** Replicas a and b of one fleet in front of `engines` holding stubs, once b hears a. */
  const pair = async (engines: number, policy: string) => {
    stubs = await Promise.all(Array.from({ length: engines }, holdingStub));
    const urls = stubs.map((s) => s.url);
    const a = await serve(nats.url, urls, policy, 'a');
    const b = await serve(nats.url, urls, policy, 'b');
    await until(
      () => ready(b.base),
      (r) => r.cluster?.peers?.includes('a') === true,
      'b hears a',
    );
    return { a, b };
  };

  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await nats?.dispose();
  });
  afterEach(async () => {
    for (const s of stubs ?? []) s.release();
    await Promise.all(started.splice(0).map((c) => c.stop(5000)));
    await Promise.all((stubs ?? []).map((s) => s.close()));
  });

  it("counts a peer's in-flight requests, and forgets them when the peer is killed", async () => {
    const { a, b } = await pair(2, 'min_ttft');
    // Their answers never come: a is killed with them in flight.
    const pending = [1, 2, 3, 4].map((k) =>
      chat(a.base, `s${k}`, [k * 100, k * 100 + 1, k * 100 + 2]).catch(() => undefined),
    );
    await until(
      async () => stubs[0]!.held() + stubs[1]!.held(),
      (n) => n === 4,
      'the engines hold 4',
    );
    expect(
      await until(
        () => seenWaiting(b.base),
        (n) => n === 4,
        "b sees a's 4 in flight",
      ),
    ).toBe(4);
    a.child.kill('SIGKILL');
    await until(
      () => seenWaiting(b.base),
      (n) => n === 0,
      "a's load expires on b",
      3000,
    );
    const r = await ready(b.base);
    expect(r.cluster).toMatchObject({ connected: true, peers: [], replica: 'b', fleet: 'test' });
    await Promise.allSettled(pending);
    const metrics = await (await fetch(`${b.base}/metrics`)).text();
    expect(metrics).toMatch(/^kvroute_cluster_peers_expired_total 1$/m);
    expect(metrics).toMatch(/^kvroute_cluster_connected 1$/m);
  });

  it('follows a session another replica placed (sticky), where it would place it elsewhere itself', async () => {
    const { a, b } = await pair(2, 'sticky');
    // On a, s1 takes the first engine and, held there, pushes s2 to the second.
    const first = chat(a.base, 's1', [1, 2, 3]);
    await until(
      async () => stubs[0]!.held() + stubs[1]!.held(),
      (n) => n === 1,
      's1 held',
    );
    const second = chat(a.base, 's2', [4, 5, 6]);
    await until(
      async () => stubs[0]!.held() + stubs[1]!.held(),
      (n) => n === 2,
      's2 held',
    );
    stubs.forEach((s) => s.release());
    const placed = (await second).headers.get('x-kvroute-instance');
    const s1 = (await first).headers.get('x-kvroute-instance');
    expect(placed).not.toBe(s1);
    // b, idle, would put a new session on s1's engine; it follows a's placement of s2 instead.
    await until(
      async () =>
        Number(
          /^kvroute_cluster_messages_received_total (\d+)/m.exec(await (await fetch(`${b.base}/metrics`)).text())?.[1],
        ),
      (n) => n >= 3,
      'b received the placements',
    );
    await new Promise((r) => setTimeout(r, 200));
    const next = chat(b.base, 's2', [4, 5, 6, 7]);
    await until(
      async () => stubs[0]!.held() + stubs[1]!.held(),
      (n) => n === 1,
      'the next turn held',
    );
    stubs.forEach((s) => s.release());
    const res = await next;
    expect(res.headers.get('x-kvroute-instance')).toBe(placed);
    expect(res.headers.get('x-kvroute-reason')).toBe('pinned');
    // At most one delta per flush, so at most 3 per request (route, first token, end) whatever the rate.
    const deltas = Number(
      /^kvroute_cluster_messages_published_total\{kind="delta"\} (\d+)/m.exec(
        await (await fetch(`${a.base}/metrics`)).text(),
      )?.[1],
    );
    expect(deltas).toBeGreaterThan(0);
    expect(deltas).toBeLessThanOrEqual(3 * 2);
  });

  it('routes on its own view while NATS is down at start, says so, and joins when it comes', async () => {
    stubs = [await holdingStub()];
    await nats.stop();
    try {
      const a = await serve(nats.url, [stubs[0]!.url], 'min_ttft', 'a');
      const r = await ready(a.base);
      expect(r).toMatchObject({ ready: true, cluster: { connected: false, peers: [] } });
      expect(await (await fetch(`${a.base}/metrics`)).text()).toMatch(/^kvroute_cluster_connected 0$/m);
      const answer = chat(a.base, 's', [1, 2]);
      await until(
        async () => stubs[0]!.held(),
        (n) => n === 1,
        'routed without NATS',
      );
      stubs[0]!.release();
      expect((await answer).status).toBe(200);
      expect(a.stderr()).toMatch(/warning: cluster: cannot reach NATS .* routing on this replica's own view/);
      await nats.restart();
      await until(
        () => ready(a.base),
        (x) => x.cluster?.connected === true,
        'joins once NATS is up',
        10_000,
      );
    } finally {
      if (nats.pid < 0 || !(await isUp(nats))) await nats.restart();
    }
  });

  it('resyncs after NATS restarts mid-run', async () => {
    const { a, b } = await pair(1, 'min_ttft');
    await nats.restart();
    const held = chat(a.base, 's', [9, 8, 7]);
    await until(
      () => seenWaiting(b.base),
      (n) => n === 1,
      "b sees a's request after the restart",
      10_000,
    );
    stubs[0]!.release();
    await held;
    await until(
      () => seenWaiting(b.base),
      (n) => n === 0,
      'and its end',
    );
  });

  it('a replica stalled (SIGSTOP, a slow consumer) catches up on resuming, and its peer takes it back', async () => {
    const { a, b } = await pair(1, 'min_ttft');
    const held = chat(a.base, 's', [4, 5, 6]);
    await until(
      () => seenWaiting(b.base),
      (n) => n === 1,
      "b sees a's request",
    );
    // b stops reading for 1.5 s (over twice the TTL) while a keeps publishing to it.
    b.child.kill('SIGSTOP');
    try {
      const second = chat(a.base, 't', [7, 8, 9]);
      await until(
        () => ready(a.base),
        (r) => r.cluster?.peers?.length === 0,
        'a forgets the silent b',
      );
      await new Promise((r) => setTimeout(r, 1500));
      b.child.kill('SIGCONT');
      // What piled up in b's socket is read; b sees both of a's requests, a hears b again.
      await until(
        () => seenWaiting(b.base),
        (n) => n === 2,
        "b sees a's two requests after its stall",
        5000,
      );
      await until(
        () => ready(a.base),
        (r) => r.cluster?.peers?.includes('b') === true,
        'a hears b again',
      );
      stubs[0]!.release();
      await Promise.all([held, second]);
      await until(
        () => seenWaiting(b.base),
        (n) => n === 0,
        'and their ends',
      );
    } finally {
      b.child.kill('SIGCONT');
    }
  });

  it('expires the other side of a partition, and recovers when it heals', async () => {
    stubs = [await holdingStub()];
    const urls = [stubs[0]!.url];
    const relay = await tcpRelay(nats.port);
    try {
      const a = await serve(nats.url, urls, 'min_ttft', 'a');
      const b = await serve(`nats://127.0.0.1:${relay.port}`, urls, 'min_ttft', 'b');
      await until(
        () => ready(a.base),
        (r) => r.cluster?.peers?.includes('b') === true,
        'a hears b',
      );
      const held = chat(b.base, 's', [5, 6]);
      await until(
        () => seenWaiting(a.base),
        (n) => n === 1,
        "a sees b's request",
      );
      relay.cut();
      await until(
        () => seenWaiting(a.base),
        (n) => n === 0,
        "b's load expires on a",
        3000,
      );
      await until(
        () => ready(a.base),
        (r) => r.cluster?.peers?.length === 0,
        'a forgets b',
      );
      await until(
        () => ready(b.base),
        (r) => r.cluster?.connected === false,
        'b knows it is cut off',
      );
      await relay.heal();
      await until(
        () => seenWaiting(a.base),
        (n) => n === 1,
        'a sees b again',
        10_000,
      );
      stubs[0]!.release();
      await held;
    } finally {
      await relay.close();
    }
  });
});

async function isUp(server: NatsServer): Promise<boolean> {
  try {
    process.kill(server.pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A TCP relay to 127.0.0.1:target that the test cuts (closing every connection and refusing new ones) and heals. */
async function tcpRelay(
  target: number,
): Promise<{ port: number; cut(): void; heal(): Promise<void>; close(): Promise<void> }> {
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server = createServer((client) => {
        const upstream = new Socket();
        upstream.connect(target, '127.0.0.1');
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('error', () => s.destroy());
          s.once('close', () => sockets.delete(s));
        }
        client.pipe(upstream).pipe(client);
        client.once('close', () => upstream.destroy());
        upstream.once('close', () => client.destroy());
      });
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
  const stopListening = () =>
    new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())));
  await listen();
  return {
    port,
    cut: () => {
      void stopListening();
      server = undefined;
      for (const s of sockets) s.destroy();
    },
    heal: listen,
    close: async () => {
      for (const s of sockets) s.destroy();
      await stopListening();
    },
  };
}
