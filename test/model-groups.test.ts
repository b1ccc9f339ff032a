/**
 * Model-aware routing (docs/policies.md, "Models"): one focused test per rule, run against both
 * cores. A request naming a model goes only to its candidates: the routable instances declaring
 * it and those serving any model.
 */
import { describe, expect, it } from 'vitest';

import { hashPrompt, promptText, Router, type PolicyName, type RouteRequest } from '../src/index.js';
import { pinKey } from '../src/core/reference/policy.js';
import { xxhash64String } from '../src/core/reference/xxhash64.js';
import { IMPLEMENTATIONS, comparableStats, thrown } from './helpers/routers.js';
import xxhash from 'xxhash-wasm';

const chain = (from: number, n: number) => Array.from({ length: n }, (_, k) => from + k);
type Fleet = Array<{ id: string; models?: string[] }>;

/** a0, a1, a2 serve A; b0, b1, b2 serve B; no wildcard. */
const SPLIT: Fleet = [
  { id: 'a0', models: ['A'] },
  { id: 'b0', models: ['B'] },
  { id: 'a1', models: ['A'] },
  { id: 'b1', models: ['B'] },
  { id: 'a2', models: ['A'] },
  { id: 'b2', models: ['B'] },
];

describe.each(IMPLEMENTATIONS)('model groups ($impl)', ({ native }) => {
  const make = (policy: PolicyName, instances: Fleet, extra = {}) =>
    new Router({ instances, policy, native, clock: 'manual', blockSize: 16, capacityBlocks: 10_000, ...extra });
  const where = (r: Router, request: RouteRequest) => {
    const ticket = r.route(request);
    return { ticket, instance: r.decision.instance, reason: r.decision.reason };
  };
  const scored = (r: Router, request: RouteRequest) =>
    r
      .explain(request)
      .candidates.filter((c) => c.score !== null)
      .map((c) => c.instance);

  describe('candidates', () => {
    const fleet: Fleet = [
      { id: 'any' }, // a wildcard
      { id: 'llama', models: ['llama'] },
      { id: 'both', models: ['qwen', 'llama'] },
      { id: 'none', models: [] },
    ];

    it('a model: its declarers and the wildcards; no model: every routable instance', () => {
      const r = make('load_only', fleet);
      expect(scored(r, { model: 'llama' })).toEqual(['any', 'llama', 'both']);
      expect(scored(r, { model: 'qwen' })).toEqual(['any', 'both']);
      expect(scored(r, {})).toEqual(['any', 'llama', 'both', 'none']);
      expect([0, 1, 2, 3].map(() => where(r, { model: 'qwen' }).instance)).toEqual(['any', 'both', 'any', 'both']);
      // The empty set is a candidate only for requests without a model; it is the least loaded now.
      expect(where(r, {}).instance).toBe('llama');
      expect(where(r, {}).instance).toBe('none');
    });

    it('a model nobody declares goes to the wildcards only, and is not interned', () => {
      const r = make('round_robin', fleet);
      expect(scored(r, { model: 'mistral' })).toEqual(['any']);
      expect([0, 1, 2].map(() => where(r, { model: 'mistral' }).instance)).toEqual(['any', 'any', 'any']);
      expect(r.models()).toEqual(['llama', 'qwen']);
      expect(r.stats().instances.map((s) => s.models)).toEqual([null, ['llama'], ['llama', 'qwen'], []]);
    });

    it('no candidate: ERR_KVROUTE_NO_INSTANCE naming the model, and nothing changes', () => {
      const r = make('unified', [
        { id: 'x', models: ['llama'] },
        { id: 'y', models: [] },
      ]);
      const before = comparableStats(r);
      const error = thrown(() => r.route({ model: 'qwen-72b', hashIds: [1, 2] }));
      expect(error).toMatchObject({ code: 'ERR_KVROUTE_NO_INSTANCE' });
      expect(error.message).toContain('"qwen-72b"');
      expect(comparableStats(r)).toEqual(before);
      r.drainInstance('x');
      expect(thrown(() => r.route({ model: 'llama' })).message).toContain('"llama"');
      // A dry run answers with no instance and every score null.
      expect(r.explain({ model: 'llama' })).toMatchObject({ instance: null, reason: null });
      expect(where(r, {}).instance).toBe('y');
    });

    it("a refused request's model and blockTokens do not carry over to the next request", () => {
      const r = make('lmetric', [
        { id: 'a', models: ['A'] },
        { id: 'none', models: [] },
      ]);
      r.complete(r.route({ hashIds: chain(1, 4), model: 'A' }));
      r.explain({}); // the slab back at its defaults
      expect(thrown(() => r.route({ hashIds: chain(1, 4), model: 'A', blockTokens: 0 })).message).toContain(
        'request.blockTokens',
      );
      // No model and the router's blockSize: both instances are candidates, 4 x 16 tokens cached on a.
      expect(r.explain({ hashIds: chain(1, 4) }).candidates.map((c) => c.score)).toEqual([0, 64]);
      r.route({ hashIds: chain(1, 4), model: 'A', blockTokens: 100 });
      expect(r.explain({ hashIds: chain(1, 4) }).candidates.map((c) => c.score)).toEqual([0, 64]);
    });

    it('explain() dry runs honour the model and move nothing', () => {
      const r = make('round_robin', SPLIT);
      const dry = r.explain({ model: 'B', hashIds: [1, 2, 3] });
      expect(dry.instance).toBe('b0');
      expect(dry.candidates.map((c) => c.score === null)).toEqual([true, false, true, false, true, false]);
      expect(where(r, { model: 'B' }).instance).toBe('b0');
    });
  });

  describe('setInstanceModels', () => {
    it('changes what an instance serves live; its cache, counters and tickets stay', () => {
      const r = make('unified', [{ id: 'x' }, { id: 'y', models: ['qwen'] }]);
      const t = r.route({ hashIds: chain(1, 10), model: 'llama' });
      expect(r.decision.instance).toBe('x');
      r.setInstanceModels('x', ['mistral', 'llama', 'mistral']);
      expect(r.instanceModels('x')).toEqual(['llama', 'mistral']);
      expect(r.instanceModels('y')).toEqual(['qwen']);
      expect(r.models()).toEqual(['llama', 'mistral', 'qwen']);
      const x = r.stats().instances[0]!;
      expect(x).toMatchObject({ models: ['llama', 'mistral'], blocks: 10, routed: 1, shadow: { waiting: 1 } });
      expect(r.match({ hashIds: chain(1, 10) })).toEqual({ x: 10, y: 0 });
      r.complete(t);
      expect(where(r, { hashIds: chain(1, 12), model: 'llama' })).toMatchObject({ instance: 'x', reason: 'affinity' });

      r.setInstanceModels('x', []);
      expect(thrown(() => r.route({ model: 'llama' })).code).toBe('ERR_KVROUTE_NO_INSTANCE');
      r.setInstanceModels('x', undefined);
      expect(r.instanceModels('x')).toBeUndefined();
      expect(r.models()).toEqual(['qwen']);
      expect(where(r, { model: 'llama' }).instance).toBe('x');
      r.removeInstance('y');
      expect(r.models()).toEqual([]);
      expect(thrown(() => r.instanceModels('y')).code).toBe('ERR_KVROUTE_UNKNOWN_INSTANCE');
      expect(r.checkInvariants()).toBe('');
    });

    it('addInstance takes models, and a re-added id starts from its own declaration', () => {
      const r = make('load_only', [{ id: 'x', models: ['a'] }]);
      r.addInstance('y', { models: ['b'], capacityBlocks: 50 });
      expect(where(r, { model: 'b' }).instance).toBe('y');
      r.removeInstance('y');
      r.addInstance('y');
      expect(r.instanceModels('y')).toBeUndefined();
      expect(where(r, { model: 'b' }).instance).toBe('y');
    });
  });

  describe('sticky', () => {
    it('keeps one pin per (session, model)', () => {
      const r = make('sticky', [{ id: 'a', models: ['A'] }, { id: 'b', models: ['B'] }, { id: 'w' }]);
      expect(where(r, { session: 's', model: 'A' })).toMatchObject({ instance: 'a', reason: 'new_session' });
      expect(where(r, { session: 's', model: 'B' })).toMatchObject({ instance: 'b', reason: 'new_session' });
      expect(where(r, { session: 's' })).toMatchObject({ instance: 'w', reason: 'new_session' });
      for (let k = 0; k < 3; k += 1) {
        expect(where(r, { session: 's', model: 'A' })).toMatchObject({ instance: 'a', reason: 'pinned' });
        expect(where(r, { session: 's', model: 'B' })).toMatchObject({ instance: 'b', reason: 'pinned' });
        expect(where(r, { session: 's' })).toMatchObject({ instance: 'w', reason: 'pinned' });
      }
      expect(r.stats().sessions).toBe(3);
    });

    it('never honours a pin to an instance that does not serve the model', () => {
      const r = make('sticky', [
        { id: 'a0', models: ['A'] },
        { id: 'a1', models: ['A'] },
      ]);
      expect(where(r, { session: 's', model: 'A' })).toMatchObject({ instance: 'a0', reason: 'new_session' });
      r.setInstanceModels('a0', ['B']);
      expect(where(r, { session: 's', model: 'A' })).toMatchObject({ instance: 'a1', reason: 'repinned' });
      r.setInstanceModels('a0', ['A']);
      expect(where(r, { session: 's', model: 'A' })).toMatchObject({ instance: 'a1', reason: 'pinned' });
      // A session-less pin (no model) to a0 is no pin for model A.
      expect(where(r, { session: 't' })).toMatchObject({ instance: 'a0', reason: 'new_session' });
      r.setInstanceModels('a0', []);
      expect(where(r, { session: 't' })).toMatchObject({ instance: 'a0', reason: 'pinned' });
      expect(where(r, { session: 't', model: 'A' })).toMatchObject({ instance: 'a1', reason: 'new_session' });
    });

    it('the pin key is XXH64 of the group id (4 bytes LE) seeded with the session key', async () => {
      const wasm = await xxhash();
      const session = xxhash64String('conversation-7', 0n);
      expect(pinKey(session, -1)).toBe(session);
      for (const group of [0, 1, 2, 300, 65_535]) {
        const le = new Uint8Array(4);
        new DataView(le.buffer).setUint32(0, group, true);
        expect(pinKey(session, group)).toBe(wasm.h64Raw(le, session));
      }
    });
  });

  describe('session_hash', () => {
    const sessions = Array.from({ length: 200 }, (_, k) => `conversation-${k}`);
    const placement = (r: Router, model: string) =>
      new Map(sessions.map((s) => [s, where(r, { session: s, model }).instance]));

    it('keeps a session on one instance of its model, spread over the group', () => {
      const r = make('session_hash', SPLIT);
      const a = placement(r, 'A');
      expect(placement(r, 'A')).toEqual(a);
      expect(new Set(a.values())).toEqual(new Set(['a0', 'a1', 'a2']));
      expect(new Set(placement(r, 'B').values())).toEqual(new Set(['b0', 'b1', 'b2']));
    });

    it('within a group, moves only the sessions of a drained instance, and nothing of another group', () => {
      const r = make('session_hash', SPLIT);
      const a = placement(r, 'A');
      const b = placement(r, 'B');
      r.drainInstance('a1');
      const drained = placement(r, 'A');
      for (const s of sessions) {
        if (a.get(s) !== 'a1') expect(drained.get(s)).toBe(a.get(s));
        else expect(['a0', 'a2']).toContain(drained.get(s));
      }
      expect(placement(r, 'B')).toEqual(b);
    });
  });

  describe('round_robin', () => {
    it('each group cycles its own candidates', () => {
      const r = make('round_robin', SPLIT);
      const order = ['A', 'B', 'A', 'B', 'A', 'B', 'A', 'B'].map((model) => where(r, { model }).instance);
      expect(order).toEqual(['a0', 'b0', 'a1', 'b1', 'a2', 'b2', 'a0', 'b0']);
      expect([0, 1, 2].map(() => where(r, {}).instance)).toEqual(['a0', 'b0', 'a1']);
    });
  });

  it.each(['round_robin', 'session_hash', 'load_only', 'lmetric', 'sticky', 'unified', 'unified_kv_both'] as const)(
    '%s: draining an instance of model A changes nothing for model B',
    (policy) => {
      const run = (drain: boolean) => {
        const r = make(policy, SPLIT, { capacityBlocks: 300 });
        if (drain) r.drainInstance('a1');
        const b: string[] = [];
        const open: number[] = [];
        for (let k = 0; k < 120; k += 1) {
          const model = k % 3 === 0 ? 'B' : 'A';
          const session = `${model}-${k % 7}`;
          const ticket = r.route({ session, model, hashIds: chain(1000 * (k % 7), 5 + (k % 11)) });
          if (model === 'B') b.push(`${r.decision.instance}/${r.decision.reason}`);
          open.push(ticket);
          if (open.length > 9) r.complete(open.shift()!);
        }
        return b;
      };
      expect(run(true)).toEqual(run(false));
    },
  );

  describe('unified', () => {
    // a0 holds the prefix and carries 4 requests; every other instance carries none.
    const loaded = (policy: PolicyName) => {
      const r = make(policy, [
        { id: 'a0', models: ['A'] },
        { id: 'a1', models: ['A'] },
        { id: 'b0', models: ['B'] },
        { id: 'b1', models: ['B'] },
        { id: 'b2', models: ['B'] },
      ]);
      r.complete(r.route({ hashIds: chain(1, 10), model: 'A' }));
      r.setTime(1000);
      r.setObservedState('a0', { timestampMs: 1000, running: 4, kvBlocksUsed: 900, kvBlocksTotal: 1000 });
      r.setObservedState('a1', { timestampMs: 1000, kvBlocksUsed: 100, kvBlocksTotal: 1000 });
      return r;
    };

    it("gates on the mean load of the request's group, not of the fleet", () => {
      // Group A: 4 <= 2.0 x mean(4, 0) = 4 passes. The fleet: 4 > 2.0 x mean(4, 0, 0, 0, 0) = 1.6.
      expect(where(loaded('unified'), { hashIds: chain(1, 12), model: 'A' })).toMatchObject({
        instance: 'a0',
        reason: 'affinity',
      });
      expect(where(loaded('unified'), { hashIds: chain(1, 12) }).reason).toBe('overload');
    });

    it("unified_kv_both gates on the group's mean KV usage", () => {
      // Group A: 0.9 <= 2.0 x mean(0.9, 0.1) = 1.0 passes; the fleet: 0.9 > 2.0 x 1.0 / 5 = 0.4.
      // With no load anywhere only KV can close the gate.
      const r = loaded('unified_kv_both');
      r.setObservedState('a0', { timestampMs: 1000, running: 0, kvBlocksUsed: 900, kvBlocksTotal: 1000 });
      const placed = where(r, { hashIds: chain(1, 12), model: 'A' });
      expect(placed).toMatchObject({ instance: 'a0', reason: 'affinity' });
      r.complete(placed.ticket);
      expect(r.explain({ hashIds: chain(1, 12) }).reason).toBe('kv_pressure');
    });
  });

  describe('blockTokens', () => {
    it('a prompt-hashed request equals its ids with blockTokens = hashChunkBytes / 4', () => {
      // blockSize 16, hashChunkBytes 128: prompt blocks are 32 tokens, not the router's 16.
      const byText = make('unified', [{ id: 'e0' }, { id: 'e1' }, { id: 'e2' }]);
      const byIds = make('unified', [{ id: 'e0' }, { id: 'e1' }, { id: 'e2' }]);
      const history = new Map<string, Array<{ role: string; content: string }>>();
      const open: Array<[number, number]> = [];
      for (let k = 0; k < 60; k += 1) {
        const session = `s${k % 4}`;
        const messages = history.get(session) ?? [{ role: 'system', content: `You are agent ${k % 2}. `.repeat(9) }];
        messages.push({ role: k % 2 === 0 ? 'user' : 'assistant', content: `turn ${k}: ${'tool output '.repeat(k)}` });
        history.set(session, messages);
        const text = promptText(messages);
        const a = byText.route({ messages, session });
        const b = byIds.route({
          hashIds: hashPrompt(text, { chunkBytes: 128, native }),
          blockTokens: 32,
          inputTokens: Math.ceil(Buffer.byteLength(text) / 4),
          session,
        });
        expect({ ...byIds.explain(), keys: null }).toEqual({ ...byText.explain(), keys: null }); // keyed by ids vs text: all else equal
        open.push([a, b]);
        if (open.length > 3) {
          const [ta, tb] = open.shift()!;
          byText.complete(ta);
          byIds.complete(tb);
        }
      }
      expect(comparableStats(byIds)).toEqual(comparableStats(byText));
      expect(byText.stats().decisions.affinity).toBeGreaterThan(20);
    });

    it('scales cached tokens and the default inputTokens', () => {
      const r = make('lmetric', [{ id: 'e0' }, { id: 'e1' }]);
      r.route({ hashIds: chain(1, 4), blockTokens: 100, inputTokens: 1000 });
      // e0 holds 4 blocks = 400 tokens: (1000 queued + 600 uncached) x (1 + 1) = 3200; e1: 1000 x 1.
      expect(r.explain({ hashIds: chain(1, 6), blockTokens: 100, inputTokens: 1000 }).candidates).toMatchObject([
        { matchedBlocks: 4, score: 3200 },
        { matchedBlocks: 0, score: 1000 },
      ]);
      // Without inputTokens: 6 blocks x 100 tokens.
      expect(r.explain({ hashIds: chain(1, 6), blockTokens: 100 }).candidates.map((c) => c.score)).toEqual([
        (1000 + 200) * 2,
        600,
      ]);
      // The router's blockSize (16) again when the request gives none.
      expect(r.explain({ hashIds: chain(1, 6) }).candidates.map((c) => c.score)).toEqual([(1000 + 32) * 2, 96]);
    });
  });
});
