/**
 * Flow control's queue (src/flow/fair-queue.ts): a randomized differential test against the
 * brute-force reference model (test/helpers/flow-reference.ts), then the properties the model
 * exists for: weighted shares of cost between backlogged tenants, strict priority with its
 * anti-starvation bound, continuations ahead of first turns, deadlines, bounded memory.
 */
import { describe, expect, it } from 'vitest';

import { FairQueue } from '../src/flow/fair-queue.js';
import type { QueuedRequest } from '../src/flow/queued-request.js';
import { ReferenceQueue } from './helpers/flow-reference.js';
import { Rng } from './helpers/random.js';

describe('FairQueue against the reference model', () => {
  it('makes the same decisions over random pushes, peeks, pops (of some tenants too), removals and deadlines', () => {
    for (let seed = 1; seed <= 60; seed++) {
      const rng = new Rng(seed);
      const tenantCount = rng.int(1, 12);
      const tenants = Array.from({ length: tenantCount }, (_, i) => `t${i}`);
      const weights = new Map(tenants.map((t) => [t, rng.pick([1, 1, 2, 3, 0.5])]));
      const weight = (tenant: string, rank: number): number => weights.get(tenant)! * (rank + 1);
      const starve = [Infinity, rng.int(50, 2_000), rng.pick([Infinity, rng.int(100, 5_000)])];
      const queue = new FairQueue<number>(3, (rank) => starve[rank]!, weight);
      const reference = new ReferenceQueue(starve, weight);
      const live = new Map<number, QueuedRequest<number>>();
      let now = 0;
      for (let step = 0; step < 1_500; step++) {
        now += rng.pick([0, 0, 1, 5, 50, 400]);
        const op = rng.next();
        const context = `seed ${seed} step ${step}`;
        if (op < 0.45) {
          const spec = {
            tenant: rng.pick(tenants),
            classRank: rng.int(0, 2),
            cost: rng.pick([1, rng.int(1, 100), rng.int(100, 100_000)]),
            continuation: rng.chance(0.25),
            deadline: now + rng.int(1, 20_000),
          };
          const pushed = queue.push(reference.size, spec, now);
          const mirrored = reference.push(spec, now);
          expect(pushed.seq, context).toBe(mirrored.seq);
          live.set(pushed.seq, pushed);
        } else if (op < 0.52) {
          expect(queue.peek(now)?.seq, context).toBe(reference.peek(now)?.seq);
        } else if (op < 0.6) {
          const allowed = new Set(tenants.filter(() => rng.chance(0.5)));
          const got = queue.popAdmissible((t) => allowed.has(t));
          const want = reference.popAdmissible((t) => allowed.has(t));
          expect(got?.seq, context).toBe(want?.seq);
          if (got !== undefined) live.delete(got.seq);
        } else if (op < 0.85) {
          const got = queue.pop(now);
          const want = reference.pop(now);
          expect(got?.seq, context).toBe(want?.seq);
          if (got !== undefined) live.delete(got.seq);
        } else if (op < 0.93 && live.size > 0) {
          const seq = rng.pick([...live.keys()]);
          expect(queue.remove(live.get(seq)!), context).toBe(reference.remove(seq));
          live.delete(seq);
        } else {
          const got = queue.expired(now).map((r) => r.seq);
          expect(got, context).toEqual(reference.expired(now).map((r) => r.seq));
          for (const seq of got) live.delete(seq);
          expect(queue.nextDeadline(), context).toBe(
            live.size === 0 ? undefined : Math.min(...[...live.values()].map((r) => r.deadline)),
          );
        }
        expect(queue.size, context).toBe(reference.size);
      }
    }
  });
});

/** Pops everything, returning the cost dispatched per tenant after `pops` pops. */
function serviceAfter(queue: FairQueue<string>, pops: number, now = 0): Map<string, number> {
  const served = new Map<string, number>();
  for (let i = 0; i < pops; i++) {
    const r = queue.pop(now)!;
    served.set(r.tenant, (served.get(r.tenant) ?? 0) + r.cost);
  }
  return served;
}

describe('FairQueue: the properties', () => {
  const far = 1e12;

  it('shares cost between backlogged tenants by weight, not by request count', () => {
    const rng = new Rng(7);
    const weights: Record<string, number> = { small: 1, big: 1, heavy: 3 };
    const queue = new FairQueue<string>(
      1,
      () => Infinity,
      (t) => weights[t]!,
    );
    // `small` sends many cheap requests, `big` few dear ones (an agent's 100k-token turns), heavy weighs 3.
    for (let i = 0; i < 4_000; i++)
      queue.push('s', { tenant: 'small', classRank: 0, cost: rng.int(50, 150), deadline: far }, 0);
    for (let i = 0; i < 200; i++)
      queue.push('b', { tenant: 'big', classRank: 0, cost: rng.int(5_000, 15_000), deadline: far }, 0);
    for (let i = 0; i < 4_000; i++)
      queue.push('h', { tenant: 'heavy', classRank: 0, cost: rng.int(100, 300), deadline: far }, 0);
    const served = serviceAfter(queue, 1_500);
    const small = served.get('small')!;
    const big = served.get('big')!;
    const heavy = served.get('heavy')!;
    // Within one request's cost of the weighted share (the largest is 15,000).
    expect(Math.abs(small - big)).toBeLessThanOrEqual(15_000 + 150);
    expect(Math.abs(heavy / 3 - small)).toBeLessThanOrEqual(15_000);
    expect(heavy / small).toBeGreaterThan(2.5);
  });

  it('lets a tenant that was idle in at once, without credit for its idle time', () => {
    const queue = new FairQueue<string>(
      1,
      () => Infinity,
      () => 1,
    );
    for (let i = 0; i < 100; i++) queue.push('n', { tenant: 'noisy', classRank: 0, cost: 10, deadline: far }, 0);
    serviceAfter(queue, 50);
    queue.push('q', { tenant: 'quiet', classRank: 0, cost: 10, deadline: far }, 0);
    // The quiet tenant's one request goes next (or after at most one more of the noisy one's).
    const next = [queue.pop(0)!.tenant, queue.pop(0)!.tenant];
    expect(next).toContain('quiet');
    // And then it has no banked credit: it alternates with the noisy one, not 50 in a row.
    for (let i = 0; i < 5; i++) queue.push('q', { tenant: 'quiet', classRank: 0, cost: 10, deadline: far }, 0);
    const order = Array.from({ length: 6 }, () => queue.pop(0)!.tenant);
    expect(order.filter((t) => t === 'noisy').length).toBeGreaterThanOrEqual(2);
  });

  it('serves a higher class first, and a starved lower class once its oldest waited its bound', () => {
    const starve = [Infinity, 1_000, Infinity];
    const queue = new FairQueue<string>(
      3,
      (rank) => starve[rank]!,
      () => 1,
    );
    queue.push('low', { tenant: 'a', classRank: 2, cost: 1, deadline: far }, 0);
    queue.push('normal', { tenant: 'a', classRank: 1, cost: 1, deadline: far }, 0);
    for (let i = 0; i < 5; i++) queue.push('high', { tenant: 'a', classRank: 0, cost: 1, deadline: far }, 0);
    expect(queue.pop(999)!.payload).toBe('high');
    // At 1,000 ms the normal class's oldest is due: it goes before the three high ones left.
    expect(queue.pop(1_000)!.payload).toBe('normal');
    expect([1, 2, 3, 4].map(() => queue.pop(1_000)!.payload)).toEqual(['high', 'high', 'high', 'high']);
    // The low class has no bound (Infinity): it waits for every higher request.
    expect(queue.pop(1e9)!.payload).toBe('low');
    expect(queue.pop(1e9)).toBeUndefined();
  });

  it('puts a session’s continuation ahead of a new session’s first turn of the same class', () => {
    const queue = new FairQueue<string>(
      1,
      () => Infinity,
      () => 1,
    );
    queue.push('first-a', { tenant: 'a', classRank: 0, cost: 100, deadline: far }, 0);
    queue.push('first-b', { tenant: 'b', classRank: 0, cost: 100, deadline: far }, 0);
    queue.push('next-turn-c', { tenant: 'c', classRank: 0, cost: 100, continuation: true, deadline: far }, 1);
    expect(queue.pop(2)!.payload).toBe('next-turn-c');
  });

  it('hands back the requests past their deadline, earliest first, and forgets them', () => {
    const queue = new FairQueue<string>(
      1,
      () => Infinity,
      () => 1,
    );
    queue.push('late', { tenant: 'a', classRank: 0, cost: 1, deadline: 300 }, 0);
    queue.push('early', { tenant: 'b', classRank: 0, cost: 1, deadline: 100 }, 0);
    queue.push('later', { tenant: 'a', classRank: 0, cost: 1, deadline: 5_000 }, 0);
    expect(queue.nextDeadline()).toBe(100);
    expect(queue.expired(99)).toEqual([]);
    expect(queue.expired(300).map((r) => r.payload)).toEqual(['early', 'late']);
    expect(queue.size).toBe(1);
    expect(queue.pop(300)!.payload).toBe('later');
    expect(queue.nextDeadline()).toBeUndefined();
  });

  it('holds no dispatched request for long: memory follows what waits', () => {
    const queue = new FairQueue<{ big: Buffer }>(
      1,
      () => Infinity,
      () => 1,
    );
    const dispatched = new Set<object>();
    for (let round = 0; round < 20_000; round++) {
      queue.push(
        { big: Buffer.alloc(0) },
        { tenant: `t${round % 1000}`, classRank: 0, cost: 1, deadline: 1e15 },
        round,
      );
      if (round % 2 === 1) {
        dispatched.add(queue.pop(round)!);
        dispatched.add(queue.pop(round)!);
      }
    }
    expect(queue.size).toBe(0);
    // Internal holdings are bounded by the compaction thresholds, not by the 20,000 pushed.
    const held = (queue as unknown as { deadlines: { size: number } }).deadlines.size;
    expect(held).toBeLessThanOrEqual(1024 + 2);
  });
});
