/**
 * Reconciling the router's shadow counters with engines' /metrics: Router.reconcile() releases
 * tickets the engine no longer has only when the excess persists across two rounds, and the
 * ShadowReconciler does it against a simulated engine's real /metrics.
 */
import { describe, expect, it } from 'vitest';

import { Router } from '../src/core/router.js';
import { startSimFleet } from '../src/sim/sim-fleet.js';
import { ShadowReconciler } from '../src/state/shadow-reconciler.js';

const inFlight = (router: Router, instance: string) => {
  const s = router.stats().instances.find((i) => i.instance === instance)!.shadow;
  return s.running + s.waiting;
};

describe.each([true, false])('Router.reconcile (native %s)', (native) => {
  const make = () => new Router({ instances: ['a', 'b'], policy: 'round_robin', native });
  const routeTo = (router: Router, instance: string) => {
    for (let i = 0; i < 4; i++) {
      const ticket = router.route({ hashIds: [i + 1] });
      if (router.decision.instance === instance) return ticket;
      router.complete(ticket);
    }
    throw new Error('round robin never reached ' + instance);
  };

  it('releases leaked tickets once the excess persists, oldest first, never younger ones', () => {
    const router = make();
    const leaked = [routeTo(router, 'a'), routeTo(router, 'a'), routeTo(router, 'a')];
    const onB = routeTo(router, 'b');
    expect(router.reconcile('a', 0)).toBe(0); // first sight of an excess: nothing yet
    const young = routeTo(router, 'a');
    expect(inFlight(router, 'a')).toBe(4);
    expect(router.reconcile('a', 0)).toBe(3); // the young one was not open at the first round
    expect(inFlight(router, 'a')).toBe(1);
    expect(inFlight(router, 'b')).toBe(1);
    for (const ticket of leaked) router.complete(ticket); // the caller's late complete(): a no-op
    expect(() => router.complete(leaked[0]!)).toThrow(/not open/);
    router.onFirstToken(young);
    router.complete(young);
    router.complete(onB);
    expect(inFlight(router, 'a')).toBe(0);
    expect(router.checkInvariants()).toBe('');
  });

  it('leaves a transient excess alone and counts only this router’s tickets', () => {
    const router = make();
    const t1 = routeTo(router, 'a');
    const t2 = routeTo(router, 'a');
    expect(router.reconcile('a', 0)).toBe(0); // in transit: the engine has not seen them yet
    router.complete(t1);
    router.complete(t2);
    expect(router.reconcile('a', 0)).toBe(0);
    const t3 = routeTo(router, 'a');
    expect(router.reconcile('a', 5)).toBe(0); // load from elsewhere is not drift
    expect(router.reconcile('a', 5)).toBe(0);
    expect(router.reconcile('a', 0)).toBe(0); // the previous round saw no excess
    expect(router.reconcile('a', 0)).toBe(1);
    expect(() => router.abort(t3)).not.toThrow();
    expect(inFlight(router, 'a')).toBe(0);
  });

  it('refuses a bad count and an unknown instance, naming them', () => {
    const router = make();
    expect(() => router.reconcile('a', -1)).toThrow(/engineRequests/);
    expect(() => router.reconcile('a', 1.5)).toThrow(/engineRequests/);
    expect(() => router.reconcile('zzz', 0)).toThrow(/"zzz" is not known/);
  });

  it('forgets a removed instance’s tickets when its slot is reused', () => {
    const router = make();
    const old = routeTo(router, 'a');
    router.removeInstance('a');
    router.addInstance('c');
    expect(router.reconcile('c', 0)).toBe(0);
    expect(router.reconcile('c', 0)).toBe(0);
    router.complete(old);
  });
});

describe('ShadowReconciler against a simulated engine’s /metrics', () => {
  it('releases the leaked tickets, keeps the real request, and skips an engine that does not answer', async () => {
    const fleet = await startSimFleet({ instances: 1, port: 0, speed: 1 });
    const [url] = fleet.urls as [string];
    const dead = 'http://127.0.0.1:9'; // discard port: nothing listens on loopback
    const router = new Router({ instances: [url, dead], policy: 'round_robin' });
    const rounds: number[][] = [];
    const reconciler = new ShadowReconciler({
      router,
      timeoutMs: 2_000,
      onRound: (results) => rounds.push(results.map((r) => r.released)),
    });
    const controller = new AbortController();
    try {
      const toEngine = () => {
        for (let i = 0; i < 2; i++) {
          const ticket = router.route({ prompt: 'p' });
          if (router.decision.instance === url) return ticket;
          router.complete(ticket);
        }
        throw new Error('unreachable');
      };
      const leaked = [toEngine(), toEngine()];
      const real = toEngine();
      const response = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'qwen3-coder-30b-a3b', prompt: 'hello', max_tokens: 5_000, stream: true }),
        signal: controller.signal,
      });
      const reader = response.body!.getReader();
      await reader.read(); // the first chunk: the engine is running it
      router.onFirstToken(real);

      const first = await reconciler.reconcileOnce();
      expect(first[0]).toMatchObject({ instance: url, engineRequests: 1, released: 0 });
      // The engine's own prefix-cache ratio comes with the round (one query so far: no hit yet).
      expect(first[0]!.prefixCacheHitRatio).toBe(0);
      expect(first[1]!.prefixCacheHitRatio).toBeUndefined();
      expect(first[1]!.error).toMatch(/GET \/metrics failed/);
      const second = await reconciler.reconcileOnce();
      expect(second[0]).toMatchObject({ instance: url, engineRequests: 1, released: 2 });
      expect(inFlight(router, url)).toBe(1);
      expect(rounds).toEqual([
        [0, 0],
        [2, 0],
      ]);
      for (const ticket of leaked) router.complete(ticket);
      controller.abort();
      router.abort(real);
      expect(inFlight(router, url)).toBe(0);
    } finally {
      controller.abort();
      await reconciler.stop();
      await fleet.close();
    }
  });

  it('runs rounds on its interval until stopped', async () => {
    const fleet = await startSimFleet({ instances: 1, port: 0 });
    const router = new Router({ instances: fleet.urls });
    let count = 0;
    let resolve!: () => void;
    const twoRounds = new Promise<void>((r) => (resolve = r));
    const reconciler = new ShadowReconciler({
      router,
      intervalMs: 20,
      onRound: () => {
        if (++count === 2) resolve();
      },
    });
    try {
      reconciler.start();
      await twoRounds;
      await reconciler.stop();
      const after = count;
      await new Promise((r) => setTimeout(r, 100));
      expect(count).toBe(after);
    } finally {
      await reconciler.stop();
      await fleet.close();
    }
    expect(() => new ShadowReconciler({ router, intervalMs: 0 })).toThrow(/intervalMs/);
  });
});
