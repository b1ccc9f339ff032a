/**
 * ringFirstTurn (docs/policies.md "Ring first turns"), in both cores: a session a router has not
 * placed goes to the session ring's instance, whatever the router's load or the order it added its
 * instances in, so two routers (replicas) agree; a known session follows the policy; a dry run
 * records nothing; an entry to an instance that left is placed by the ring again.
 */
import { describe, expect, it } from 'vitest';

import { Router, type PolicySpec, type RouteRequest } from '../src/index.js';
import { IMPLEMENTATIONS } from './helpers/routers.js';

const IDS = ['gpu-a', 'gpu-b', 'gpu-c', 'gpu-d', 'gpu-e'];
const RING: PolicySpec = { name: 'min_ttft', ringFirstTurn: 1 };
const turn = (session: string, blocks: number): RouteRequest => ({
  session,
  hashIds: Array.from({ length: blocks }, (_, k) => k + 1 + 1000 * session.length),
});

describe.each(IMPLEMENTATIONS)('ringFirstTurn ($impl)', ({ native }) => {
  const router = (policy: PolicySpec | 'session_hash', ids = IDS) =>
    new Router({ native, policy, instances: [...ids], capacityBlocks: 10_000 });

  it('sends new sessions where session_hash would, whatever the load or the instance order', () => {
    const a = router(RING);
    const b = router(RING, [...IDS].reverse());
    const hash = router('session_hash');
    // b carries requests without a session: load a's decisions never see.
    for (let k = 0; k < 6; k += 1) b.route({ hashIds: [900 + k] });
    const used = new Set<string>();
    for (let s = 0; s < 40; s += 1) {
      const request = turn(`session-${s}`, 4);
      a.route(request);
      b.route(request);
      hash.route(request);
      expect(a.decision.reason).toBe('ring_first_turn');
      expect(b.decision.reason).toBe('ring_first_turn');
      expect(b.decision.instance).toBe(a.decision.instance);
      expect(hash.decision.instance).toBe(a.decision.instance);
      used.add(a.decision.instance!);
    }
    expect(used.size).toBeGreaterThan(1);
    expect(a.stats().sessions).toBe(40);
  });

  it('follows the policy for a session it has placed, and ignores requests without a session', () => {
    const r = router(RING);
    r.route(turn('s', 4));
    const first = r.decision.instance;
    r.route(turn('s', 6));
    expect(r.decision.reason).not.toBe('ring_first_turn');
    expect(r.decision.instance).toBe(first);
    r.route({ hashIds: [77, 78] });
    expect(r.decision.reason).not.toBe('ring_first_turn');
    expect(r.stats().decisions.ring_first_turn).toBe(1);
  });

  it('a dry run places by the ring and records nothing', () => {
    const r = router(RING);
    const dry = r.explain(turn('s', 4));
    expect(dry.reason).toBe('ring_first_turn');
    expect(r.stats().sessions).toBe(0);
    r.route(turn('s', 4));
    expect(r.decision.reason).toBe('ring_first_turn');
    expect(r.decision.instance).toBe(dry.instance);
  });

  it('a session whose instance is drained goes to the next ring instance, as on a router that never saw it', () => {
    const known = router(RING);
    known.route(turn('s', 4));
    const home = known.decision.instance!;
    const fresh = router(RING);
    known.drainInstance(home);
    fresh.drainInstance(home);
    known.route(turn('s', 6));
    fresh.route(turn('s', 6));
    expect(known.decision.reason).toBe('ring_first_turn');
    expect(known.decision.instance).not.toBe(home);
    expect(known.decision.instance).toBe(fresh.decision.instance);
  });

  it('is off by default and refused outside 0 and 1, naming the field', () => {
    const r = router({ name: 'min_ttft' });
    r.route(turn('s', 4));
    expect(r.decision.reason).not.toBe('ring_first_turn');
    expect(() => router({ name: 'min_ttft', ringFirstTurn: 2 })).toThrow(/policy\.ringFirstTurn/);
  });
});
