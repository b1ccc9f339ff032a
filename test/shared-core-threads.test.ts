/**
 * One native routing core shared by several threads (`kvroute serve --threads N`,
 * native/core/shared-core.h): every thread's router holds the core's lock for each call, so the threads'
 * calls are linearizable. Checked here by running free-racing worker threads on one core, then
 * replaying every thread's calls single-threaded in the order the core took them (each call's lock
 * number), on a fresh native core and on the TypeScript reference: every decision, ticket and
 * refusal must be the same. And no ticket is lost: after concurrent completes and aborts the
 * shared core holds no open ticket, no shadow load, and its invariants hold.
 */
import { Worker } from 'node:worker_threads';

import { describe, expect, it } from 'vitest';

import { Router, type PolicyName, type RouteRequest } from '../src/index.js';

const WORKER = new URL('./fixtures/shared-core-worker.mjs', import.meta.url);

interface Logged {
  seq: number;
  op: 'route' | 'firstToken' | 'complete' | 'abort';
  ticket?: number;
  request?: RouteRequest;
  error?: string;
  instance?: string;
  reason?: string;
}

interface Setup {
  policy: PolicyName;
  instances: Array<{ id: string; models?: string[] }>;
  capacityBlocks: number;
}

/** The manual clock's reading for every router here (the shared core's clock is the sharer's). */
const NOW_MS = 1_000_000;

function makeRouter(setup: Setup, native: boolean): Router {
  const router = new Router({
    instances: setup.instances,
    policy: setup.policy,
    capacityBlocks: setup.capacityBlocks,
    clock: 'manual',
    native,
  });
  router.setTime(NOW_MS);
  return router;
}

function runThread(workerData: Record<string, unknown>): Promise<Logged[]> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(WORKER, { workerData });
    let log: Logged[] | undefined;
    worker.once('message', (m: Logged[]) => (log = m));
    worker.once('error', reject);
    worker.once('exit', (code) =>
      code === 0 && log !== undefined ? resolve(log) : reject(new Error(`worker exited ${code}`)),
    );
  });
}

/** Runs `threads` racing threads on one shared core; returns the shared router and every logged call. */
async function race(setup: Setup, threads: number, ops: number, seed: number, closeAll: boolean) {
  const shared = makeRouter(setup, true);
  const handle = shared.share();
  const models = [...new Set(setup.instances.flatMap((i) => i.models ?? []))];
  const logs = await Promise.all(
    Array.from({ length: threads }, (_, thread) =>
      runThread({ handle, mirror: shared.mirror(), seed: seed * 131 + thread, ops, thread, models, closeAll }),
    ),
  );
  return { shared, calls: logs.flat().sort((a, b) => a.seq - b.seq) };
}

/** Replays the calls in order on a fresh router; returns each route's outcome, as the threads logged it. */
function replay(setup: Setup, calls: readonly Logged[], native: boolean) {
  const router = makeRouter(setup, native);
  return calls.map((call) => {
    if (call.op !== 'route') {
      if (call.op === 'firstToken') router.onFirstToken(call.ticket!);
      else router[call.op](call.ticket!);
      return { op: call.op, ticket: call.ticket };
    }
    try {
      const ticket = router.route(call.request!);
      return { op: 'route', ticket, instance: router.decision.instance, reason: router.decision.reason };
    } catch (error) {
      return { op: 'route', error: (error as { code?: string }).code ?? (error as Error).message };
    }
  });
}

const logged = (calls: readonly Logged[]) =>
  calls.map((c) =>
    c.op !== 'route'
      ? { op: c.op, ticket: c.ticket }
      : c.error !== undefined
        ? { op: 'route', error: c.error }
        : { op: 'route', ticket: c.ticket, instance: c.instance, reason: c.reason },
  );

const SETUPS: Array<{ name: string; setup: Setup }> = [
  {
    name: 'min_ttft, 4 wildcard instances, eviction pressure',
    setup: {
      policy: 'min_ttft',
      instances: ['a', 'b', 'c', 'd'].map((id) => ({ id })),
      capacityBlocks: 300,
    },
  },
  {
    name: 'sticky, models',
    setup: {
      policy: 'sticky',
      instances: [
        { id: 'a', models: ['m1'] },
        { id: 'b', models: ['m1', 'm2'] },
        { id: 'c', models: ['m2'] },
        { id: 'd' },
      ],
      capacityBlocks: 2000,
    },
  },
  {
    name: 'unified+A+B',
    setup: { policy: 'unified+A+B', instances: ['a', 'b', 'c'].map((id) => ({ id })), capacityBlocks: 500 },
  },
  {
    name: 'session_hash',
    setup: { policy: 'session_hash', instances: ['a', 'b', 'c', 'd', 'e'].map((id) => ({ id })), capacityBlocks: 800 },
  },
];

describe('a routing core shared by threads', () => {
  for (const { name, setup } of SETUPS)
    it(`decides as one thread replaying the same interleaving (${name})`, async () => {
      const { shared, calls } = await race(setup, 3, 1500, 7, false);
      const seqs = calls.map((c) => c.seq);
      expect(new Set(seqs).size, 'every call has its own lock number').toBe(seqs.length);
      const expected = logged(calls);
      expect(replay(setup, calls, true)).toEqual(expected);
      expect(replay(setup, calls, false)).toEqual(expected);
      expect(shared.checkInvariants()).toBe('');
      expect(calls.filter((c) => c.op === 'route' && c.error === undefined).length).toBeGreaterThan(1000);
    });

  it('loses no ticket under concurrent completes and aborts', async () => {
    const setup = SETUPS[0]!.setup;
    const { shared, calls } = await race(setup, 4, 2500, 11, true);
    const routed = calls.filter((c) => c.op === 'route' && c.error === undefined).length;
    const closed = calls.filter((c) => c.op === 'complete' || c.op === 'abort').length;
    expect(closed).toBe(routed);
    const stats = shared.stats();
    const sum = (field: 'routed' | 'completed' | 'aborted') => stats.instances.reduce((n, i) => n + i[field], 0);
    expect(sum('routed')).toBe(routed);
    expect(sum('completed') + sum('aborted')).toBe(routed);
    expect(stats.inFlight).toBe(0);
    for (const instance of stats.instances) {
      expect(instance.shadow.running, instance.instance).toBe(0);
      expect(instance.shadow.waiting, instance.instance).toBe(0);
    }
    expect(shared.checkInvariants()).toBe('');
    const lock = shared.lockStats();
    expect(lock.ops).toBeGreaterThanOrEqual(calls.length);
  });

  it('refuses to attach to a handle that was never shared, naming the option', () => {
    expect(() => new Router({ instances: [], attach: 987_654 })).toThrow(/attach: no shared router core 987654/);
    expect(() => new Router({ instances: [], attach: 1, native: false })).toThrow(
      /options\.attach needs the native router/,
    );
    const shared = new Router({ instances: ['a'] });
    expect(() => new Router({ instances: ['b'], attach: shared.share() })).toThrow(/options\.instances must be empty/);
  });
});
