/**
 * Other replicas' load and session placements pushed into a router (the load plane,
 * docs/scale-out.md): setPeerLoad() adds to the router's own counters for every load-aware policy,
 * pinSession() makes a session known where it was placed, and bad values are refused naming the
 * field. The randomized agreement of the addon and the reference lives in differential.test.ts.
 */
import { describe, expect, it } from 'vitest';

import { Router } from '../src/index.js';
import { IMPLEMENTATIONS, thrown } from './helpers/routers.js';

const ids = (from: number, n: number): number[] => Array.from({ length: n }, (_, k) => from + k);

describe.each(IMPLEMENTATIONS)('peer load and shared pins ($impl)', ({ native }) => {
  it("peers' in-flight load moves min_ttft away from an engine this router sees idle", () => {
    const router = new Router({ native, instances: ['a', 'b'], policy: 'min_ttft' });
    const request = { hashIds: ids(1, 8), inputTokens: 8 * 16 };
    const idle = router.explain(request).instance!;
    const other = idle === 'a' ? 'b' : 'a';
    router.setPeerLoad(idle, { waiting: 4, prefillTokens: 40_000, activeBlocks: 400 });
    expect(router.explain(request).instance).toBe(other);
    const a = router.stats().instances.find((s) => s.instance === idle)!;
    // Effective state is own + peers; the router's own shadow counters stay its own.
    expect(a.effective.waiting).toBe(4);
    expect(a.effective.pendingPrefillTokens).toBe(40_000);
    expect(a.shadow.waiting).toBe(0);
    router.setPeerLoad(idle, null);
    expect(router.explain(request).instance).toBe(idle);
    expect(router.checkInvariants()).toBe('');
  });

  it('peer load adds to the own counters, and a fresh observed state still bounds from below', () => {
    const router = new Router({ native, instances: ['a'], policy: 'lmetric', clock: 'manual' });
    router.setTime(1000);
    router.route({ hashIds: ids(1, 4), inputTokens: 64 });
    router.setPeerLoad('a', { running: 2, waiting: 3 });
    let e = router.stats().instances[0]!.effective;
    expect([e.running, e.waiting]).toEqual([2, 4]);
    router.setObservedState('a', { timestampMs: 1000, running: 10, waiting: 1 });
    e = router.stats().instances[0]!.effective;
    expect([e.running, e.waiting]).toEqual([10, 4]);
  });

  it("a session another replica placed follows its pin here: sticky honours it, a ring first turn doesn't override it", () => {
    const sticky = new Router({ native, instances: ['a', 'b', 'c'], policy: 'sticky' });
    sticky.pinSession('s1', 'c');
    sticky.route({ hashIds: ids(1, 4), session: 's1' });
    expect(sticky.decision.instance).toBe('c');
    expect(sticky.decision.reason).toBe('pinned');

    const ring = new Router({ native, instances: ['a', 'b', 'c'], policy: { name: 'min_ttft', ringFirstTurn: 1 } });
    const first = ring.explain({ hashIds: ids(1, 4), session: 's2' });
    expect(first.reason).toBe('ring_first_turn');
    const elsewhere = ['a', 'b', 'c'].find((i) => i !== first.instance)!;
    ring.pinSession('s2', elsewhere);
    const next = ring.explain({ hashIds: ids(1, 4), session: 's2' });
    expect(next.reason).not.toBe('ring_first_turn');
  });

  it('a pin is per model: pinning one model leaves the session new for another', () => {
    const router = new Router({
      native,
      instances: [
        { id: 'a', models: ['m1', 'm2'] },
        { id: 'b', models: ['m1', 'm2'] },
      ],
      policy: 'sticky',
    });
    router.pinSession('s', 'b', 'm1');
    router.route({ hashIds: ids(1, 4), session: 's', model: 'm1' });
    expect(router.decision.reason).toBe('pinned');
    router.route({ hashIds: ids(1, 4), session: 's', model: 'm2' });
    expect(router.decision.reason).toBe('new_session');
  });

  it('refuses bad values, naming the field, and changes nothing', () => {
    const router = new Router({ native, instances: ['a'], policy: 'min_ttft' });
    for (const [load, field] of [
      [{ running: -1 }, 'load.running'],
      [{ waiting: 1.5 }, 'load.waiting'],
      [{ prefillTokens: Number.NaN }, 'load.prefillTokens'],
      [{ activeBlocks: '3' }, 'load.activeBlocks'],
    ] as const) {
      const error = thrown(() => router.setPeerLoad('a', load as never));
      expect(error.message).toContain(field);
    }
    expect(thrown(() => router.setPeerLoad('a', 5 as never)).message).toContain('load');
    expect(thrown(() => router.setPeerLoad('nope', {})).code).toBe('ERR_KVROUTE_UNKNOWN_INSTANCE');
    expect(thrown(() => router.pinSession('s', 'nope')).code).toBe('ERR_KVROUTE_UNKNOWN_INSTANCE');
    expect(thrown(() => router.pinSession({} as never, 'a')).message).toContain('session');
    expect(router.stats().instances[0]!.effective.numRequests).toBe(0);
    expect(router.stats().sessions).toBe(0);
  });
});
