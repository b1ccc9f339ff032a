/**
 * Flow control's slots (src/flow/flow-controller.ts, slot-shares.ts): a randomized differential
 * test of the whole controller against the brute-force reference (slots, shares by weight over
 * the tenants active within the window, the headroom, the queue), then what the headroom is for:
 * a flood that fills the fleet leaves the quiet tenant a slot it takes at once.
 */
import { describe, expect, it } from 'vitest';

import { resolveFlowConfig } from '../src/flow/flow-config.js';
import { FlowController } from '../src/flow/flow-controller.js';
import type { QueuedRequest } from '../src/flow/queued-request.js';
import { ReferenceController, WINDOW_MS } from './helpers/flow-controller-reference.js';
import { Rng } from './helpers/random.js';

describe('FlowController against the reference model', () => {
  it('makes the same decisions over random enters, leaves, cancels and deadlines', () => {
    for (let seed = 1; seed <= 60; seed++) {
      const rng = new Rng(seed);
      const tenants = Array.from({ length: rng.int(1, 8) }, (_, i) => `t${i}`);
      const weights = new Map(tenants.map((t) => [t, rng.pick([1, 1, 2, 3, 0.5])]));
      const maxInFlight = rng.int(1, 24);
      const headroom = rng.pick([0, 0.125, 0.25, 0.5]);
      const queueSize = rng.int(0, 40);
      const starve = [Infinity, rng.int(50, 2_000), Infinity];
      const config = resolveFlowConfig({
        classes: starve.map((s, i) => ({ name: `c${i}`, starveAfterMs: s === Infinity ? null : s })),
        defaultClass: 'c0',
        headroom,
        tenants: Object.fromEntries(tenants.map((t) => [t, { weight: weights.get(t)! }])),
      });
      const flow = new FlowController<number>(config, { maxInFlight, queueSize, queueTimeoutMs: 60_000 });
      const reference = new ReferenceController(maxInFlight, headroom, queueSize, starve, (t) => weights.get(t)!);
      const holding: Array<{ tenant: string; tokens: number }> = [];
      const live = new Map<number, QueuedRequest<number>>();
      let now = 0;
      const drain = (context: string): void => {
        for (;;) {
          const got = flow.next(now);
          const want = reference.next(now);
          expect(got?.seq, context).toBe(want?.seq);
          if (got === undefined) return;
          live.delete(got.seq);
          holding.push({ tenant: got.tenant, tokens: got.inputTokens });
        }
      };
      for (let step = 0; step < 1_500; step++) {
        now += rng.pick([0, 1, 5, 50, 400, 3_000, WINDOW_MS]);
        const op = rng.next();
        const context = `seed ${seed} step ${step}`;
        if (op < 0.5) {
          const spec = {
            tenant: rng.pick(tenants),
            classRank: rng.int(0, 2),
            cost: rng.int(1, 10_000),
            continuation: rng.chance(0.2),
            inputTokens: rng.pick([16, 512, 2048, rng.int(1, 100_000)]),
            deadline: now + rng.int(1, 30_000),
          };
          const got = flow.enter(step, { ...spec, deadlineMs: spec.deadline - now }, now);
          const want = reference.enter(spec, now);
          if (want === 'go') {
            expect(got.kind, context).toBe('go');
            holding.push({ tenant: spec.tenant, tokens: spec.inputTokens });
          } else if (want === 'full') expect(got, context).toMatchObject({ refusal: { cause: 'queue_full' } });
          else {
            expect(got.kind, context).toBe('queued');
            if (got.kind === 'queued') {
              expect(got.request.seq, context).toBe(want.request.seq);
              expect(got.evicted?.seq, context).toBe(want.evicted?.seq);
              live.set(got.request.seq, got.request);
              if (got.evicted !== undefined) live.delete(got.evicted.seq);
            }
          }
        } else if (op < 0.85 && holding.length > 0) {
          const [holder] = holding.splice(rng.int(0, holding.length - 1), 1);
          flow.leave(holder!.tenant, holder!.tokens, now);
          reference.leave(holder!.tenant, holder!.tokens, now);
          drain(context);
        } else if (op < 0.92 && live.size > 0) {
          const seq = rng.pick([...live.keys()]);
          expect(flow.cancel(live.get(seq)!), context).toBe(reference.queue.remove(seq));
          live.delete(seq);
          drain(context);
        } else {
          const got = flow.expired(now).map((r) => r.seq);
          expect(got, context).toEqual(reference.queue.expired(now).map((r) => r.seq));
          for (const seq of got) live.delete(seq);
          drain(context);
        }
        expect(flow.active, context).toBe(reference.active);
        expect(flow.queued, context).toBe(reference.queue.size);
        expect(flow.active, context).toBeLessThanOrEqual(maxInFlight);
      }
    }
  });
});

describe('FlowController: the headroom', () => {
  const entry = (tenant: string) => ({ tenant, classRank: 1, cost: 100, inputTokens: 100 });

  it('keeps the last slots from a flood, for a quiet tenant that takes one at once', () => {
    const flow = new FlowController<string>(resolveFlowConfig({ headroom: 0.125 }), {
      maxInFlight: 16,
      queueSize: 1_000,
      queueTimeoutMs: 60_000,
    });
    // The quiet tenant was seen a moment ago: it is active, so the flood's share is 8 of 16.
    expect(flow.enter('q0', entry('quiet'), 0).kind).toBe('go');
    flow.leave('quiet', 100, 1);
    const flood = Array.from({ length: 40 }, (_, i) => flow.enter(`n${i}`, entry('noisy'), 2).kind);
    expect(flood.filter((k) => k === 'go')).toHaveLength(14); // 16 less the headroom of 2
    expect(flow.queued).toBe(26);
    expect(flow.enter('q1', entry('quiet'), 3)).toEqual({ kind: 'go' });
    expect(flow.active).toBe(15);
    // A noisy completion frees a slot: still within the headroom, and the noisy head is over its share.
    flow.leave('noisy', 100, 4);
    expect(flow.next(4)).toBeUndefined();
    expect(flow.active).toBe(14);
  });

  it('lets tenants whose share is under one slot use every slot', () => {
    const flow = new FlowController<number>(resolveFlowConfig(undefined), {
      maxInFlight: 8,
      queueSize: 1_000,
      queueTimeoutMs: 60_000,
    });
    // 100 tenants seen: each one's share is 0.08 of a slot; one holding none is under it.
    for (let i = 0; i < 100; i++) {
      expect(flow.enter(-1, entry(`t${i}`), 0).kind).toBe('go');
      flow.leave(`t${i}`, 100, 0);
    }
    for (let i = 0; i < 100; i++) expect(flow.enter(i, entry(`t${i}`), 1).kind).toBe(i < 8 ? 'go' : 'queued');
    for (let i = 0; i < 8; i++) flow.leave(`t${i}`, 100, 100);
    const admitted = [];
    for (let next = flow.next(100); next !== undefined; next = flow.next(100)) admitted.push(next.payload);
    expect(admitted).toEqual([8, 9, 10, 11, 12, 13, 14, 15]);
  });

  it('with headroom 0, every free slot goes to the queue in order', () => {
    const flow = new FlowController<string>(resolveFlowConfig({ headroom: 0 }), {
      maxInFlight: 4,
      queueSize: 1_000,
      queueTimeoutMs: 60_000,
    });
    expect(flow.enter('q', entry('quiet'), 0).kind).toBe('go');
    flow.leave('quiet', 100, 0);
    const kinds = Array.from({ length: 6 }, (_, i) => flow.enter(`n${i}`, entry('noisy'), 1).kind);
    expect(kinds).toEqual(['go', 'go', 'go', 'go', 'queued', 'queued']);
    expect(flow.enter('q1', entry('quiet'), 2).kind).toBe('queued');
  });

  it('lets a tenant alone use every slot (its share is all of them)', () => {
    const flow = new FlowController<string>(resolveFlowConfig(undefined), {
      maxInFlight: 16,
      queueSize: 1_000,
      queueTimeoutMs: 60_000,
    });
    const kinds = Array.from({ length: 20 }, (_, i) => flow.enter(`n${i}`, entry('noisy'), 0).kind);
    expect(kinds.filter((k) => k === 'go')).toHaveLength(16);
    flow.leave('noisy', 100, 1);
    expect(flow.next(1)?.payload).toBe('n16');
  });

  it('forgets a tenant idle past the window, so the flood may take its share back', () => {
    const flow = new FlowController<string>(resolveFlowConfig({ headroom: 0.125 }), {
      maxInFlight: 16,
      queueSize: 1_000,
      queueTimeoutMs: 600_000,
    });
    expect(flow.enter('q0', entry('quiet'), 0).kind).toBe('go');
    flow.leave('quiet', 100, 0);
    for (let i = 0; i < 20; i++) flow.enter(`n${i}`, entry('noisy'), 1);
    expect(flow.active).toBe(14);
    flow.leave('noisy', 100, WINDOW_MS + 1); // the quiet tenant is no longer active: the flood's share is 16
    const admitted = [];
    for (let next = flow.next(WINDOW_MS + 1); next !== undefined; next = flow.next(WINDOW_MS + 1)) admitted.push(next);
    expect(admitted).toHaveLength(3);
    expect(flow.active).toBe(16);
  });
});

describe('FlowController: a full queue', () => {
  const entry = (tenant: string) => ({ tenant, classRank: 1, cost: 100, inputTokens: 100 });

  it('refuses the flood’s newest request to make room for another tenant’s, and the flood’s own newcomer', () => {
    const flow = new FlowController<string>(resolveFlowConfig(undefined), {
      maxInFlight: 1,
      queueSize: 4,
      queueTimeoutMs: 60_000,
    });
    expect(flow.enter('held', entry('noisy'), 0).kind).toBe('go');
    for (let k = 0; k < 4; k++) expect(flow.enter(`n${k}`, entry('noisy'), 1).kind).toBe('queued');
    expect(flow.enter('n4', entry('noisy'), 2)).toMatchObject({ kind: 'refused', refusal: { cause: 'queue_full' } });
    const quiet = flow.enter('q0', entry('quiet'), 3);
    expect(quiet.kind).toBe('queued');
    expect(quiet.kind === 'queued' && quiet.evicted?.payload).toBe('n3');
    expect(flow.queued).toBe(4);
    // Two each: neither holds more, so the next newcomer of either is refused.
    expect(flow.enter('q1', entry('quiet'), 4)).toMatchObject({ kind: 'queued', evicted: { payload: 'n2' } });
    expect(flow.enter('q2', entry('quiet'), 5)).toMatchObject({ kind: 'refused', refusal: { cause: 'queue_full' } });
    flow.leave('noisy', 100, 6);
    expect(flow.next(6)?.payload).toBe('n0');
  });
});

describe('FlowController: load shedding', () => {
  const entry = (classRank: number) => ({ tenant: 't', classRank, cost: 100, inputTokens: 100 });
  const config = resolveFlowConfig({ shedding: { sloMs: 3_000, intervalMs: 10 } });

  it('sheds the lowest class first as the predicted TTFT rises, with 503-style refusals naming the bound', () => {
    let predicted: number | undefined = 500;
    const asked: number[] = [];
    const flow = new FlowController<string>(config, { maxInFlight: 0, queueSize: 0, queueTimeoutMs: 1 }, (tokens) => {
      asked.push(tokens);
      return predicted;
    });
    const kinds = (now: number): string[] => [0, 1, 2].map((rank) => flow.enter('r', entry(rank), now).kind);
    expect(kinds(0)).toEqual(['go', 'go', 'go']);
    predicted = 1_500; // past low's 1 s, within normal's 2 s
    expect(kinds(5)).toEqual(['go', 'go', 'go']); // the prediction is kept for intervalMs
    expect(kinds(10)).toEqual(['go', 'go', 'refused']);
    predicted = 2_500;
    expect(kinds(20)).toEqual(['go', 'refused', 'refused']);
    predicted = 4_000;
    const refusal = flow.enter('r', entry(0), 30);
    expect(refusal).toEqual({
      kind: 'refused',
      refusal: { cause: 'shed', predictedMs: 4_000, boundMs: 3_000, retryAfterMs: 1_000 },
    });
    predicted = undefined; // no instance priced in seconds: nothing is shed
    expect(kinds(40)).toEqual(['go', 'go', 'go']);
    expect(new Set(asked)).toEqual(new Set([1024])); // the typical request's size, the default
    expect(asked).toHaveLength(5); // once per interval, not per request
  });

  it('takes a class its own bound, and validates the section naming the key', () => {
    const own = resolveFlowConfig({
      classes: [{ name: 'high' }, { name: 'normal', shedAtMs: 100 }],
      shedding: { sloMs: 1_000, typicalTokens: 4096 },
    });
    const flow = new FlowController<string>(own, { maxInFlight: 0, queueSize: 0, queueTimeoutMs: 1 }, () => 500);
    expect(flow.enter('r', entry(0), 0).kind).toBe('go');
    expect(flow.enter('r', entry(1), 0)).toMatchObject({ refusal: { cause: 'shed', boundMs: 100 } });
    expect(() => resolveFlowConfig({ shedding: {} })).toThrow('flow.shedding.sloMs is required');
    expect(() => resolveFlowConfig({ shedding: { sloMs: 1000, slo: 1 } })).toThrow('flow.shedding: unknown key "slo"');
    expect(() => resolveFlowConfig({ shedding: { sloMs: -1 } })).toThrow('flow.shedding.sloMs must be an integer >= 1');
    expect(() => resolveFlowConfig({ headroom: 0.9 })).toThrow('flow.headroom must be a number from 0 to 0.5, got 0.9');
  });
});
