/**
 * The event-fed index, one example per rule (docs/kv-events.md, "The event-fed index"), on both
 * cores: stored chains from the root and from a known parent, orphans, ignored media and
 * adapters, removals of known and unknown hashes, clears, two engine hashes on one key,
 * idempotent re-stores, walk-until-first-miss, vLLM's never-the-whole-prompt cap, the fed switch,
 * FLAG_TOKEN_KEYS, instance reset, more than 56 instances, and every refusal of a bad packed
 * stream (which changes nothing).
 */
import { describe, expect, it } from 'vitest';

import {
  EVENT_STAT_FIELDS,
  EventStat,
  FLAG_DRY_RUN,
  FLAG_TOKEN_KEYS,
  PACKED_OP_CLEARED,
  PACKED_OP_REMOVED,
  PACKED_OP_STORED,
  type PackedKvEvents,
} from '../src/core/core-router.js';
import { hashTokenBlocks } from '../src/core/hashing.js';
import type { KvEvent } from '../src/events/kv-event-batch.js';
import { KvEventPacker } from '../src/events/packed-kv-events.js';
import { makeCore, matchOf, setRequest, type CoreUnderTest } from './helpers/core-twins.js';
import { IMPLEMENTATIONS, thrown } from './helpers/routers.js';

const BS = 4;
/** Tokens of blocks 0..n of one conversation: block k is [10k+1, 10k+2, 10k+3, 10k+4]. */
const tokensOf = (blocks: number, base = 0) =>
  Uint32Array.from({ length: blocks * BS }, (_, i) => base + 10 * Math.floor(i / BS) + (i % BS) + 1);
const keysOf = (blocks: number, base = 0) => hashTokenBlocks(tokensOf(blocks, base), BS, undefined, { native: false });

const stored = (
  hashes: bigint[],
  parent: bigint | null,
  tokens: Uint32Array,
  extra: { medium?: string | null; loraId?: number | null } = {},
): KvEvent => ({
  type: 'stored',
  blockHashes: hashes,
  parentBlockHash: parent,
  tokenIds: Array.from(tokens),
  blockSize: BS,
  loraId: extra.loraId ?? null,
  medium: extra.medium === undefined ? 'GPU' : extra.medium,
});
const removed = (hashes: bigint[], medium: string | null = 'GPU'): KvEvent => ({
  type: 'removed',
  blockHashes: hashes,
  medium,
});
const cleared: KvEvent = { type: 'cleared' };

function apply(c: CoreUnderTest, slot: number, events: KvEvent[]): void {
  const packer = new KvEventPacker(1, 1);
  packer.addEvents(events);
  c.core.applyKvEvents(slot, packer);
}

function stats(c: CoreUnderTest, slot: number): Record<keyof typeof EventStat, number> {
  const out = new Float64Array(EVENT_STAT_FIELDS);
  c.core.eventStats(slot, out);
  return Object.fromEntries(Object.entries(EventStat).map(([name, at]) => [name, out[at]!])) as never;
}

/** One event-fed instance (plus `extra` plain ones) at block size BS. */
function fleet(native: boolean, extra = 0): CoreUnderTest {
  const c = makeCore(native, { blockTokens: BS });
  for (let k = 0; k <= extra; k++) c.core.addInstance(`engine-${k}`, 1000);
  c.core.setEventFed(0, true);
  return c;
}

/** Slot 0's match of the first `blocks` keys, with a prompt one token longer (no cap in the way). */
const held = (c: CoreUnderTest, blocks: number, base = 0) =>
  matchOf(c, keysOf(blocks, base), 1, { inputTokens: blocks * BS + 1 })[0];

describe.each(IMPLEMENTATIONS)('event-fed index ($impl)', ({ native }) => {
  it('stores a chain from the root: the request keys of the same tokens match it', () => {
    const c = fleet(native);
    apply(c, 0, [stored([101n, 102n, 103n], null, tokensOf(3))]);
    expect(held(c, 3)).toBe(3);
    expect(held(c, 5)).toBe(3);
    expect(stats(c, 0)).toMatchObject({ Stored: 3, HeldKeys: 3, EngineBlocks: 3, EventFed: 1 });
  });

  it('caps the match as vLLM reports it: never the whole prompt', () => {
    const c = fleet(native);
    apply(c, 0, [stored([101n, 102n, 103n], null, tokensOf(3))]);
    const ids = keysOf(3);
    // 12 tokens in 3 full blocks: vLLM recomputes the last token, so 2 blocks (8 tokens) cached.
    expect(matchOf(c, ids, 1)[0]).toBe(2);
    expect(matchOf(c, ids, 1, { inputTokens: 12 })[0]).toBe(2);
    expect(matchOf(c, ids, 1, { inputTokens: 13 })[0]).toBe(3);
    expect(matchOf(c, ids, 1, { inputTokens: 1 })[0]).toBe(0);
    expect(matchOf(c, ids, 1, { inputTokens: 0 })[0]).toBe(0);
  });

  it('continues a chain from a known parent', () => {
    const c = fleet(native);
    const tokens = tokensOf(3);
    apply(c, 0, [stored([101n], null, tokens.subarray(0, BS))]);
    apply(c, 0, [stored([102n, 103n], 101n, tokens.subarray(BS))]);
    expect(held(c, 3)).toBe(3);
  });

  it('skips a stored event whose parent is unknown, counting its blocks as orphaned', () => {
    const c = fleet(native);
    const tokens = tokensOf(3);
    apply(c, 0, [stored([101n], null, tokens.subarray(0, BS)), stored([102n, 103n], 999n, tokens.subarray(BS))]);
    expect(held(c, 3)).toBe(1);
    expect(stats(c, 0)).toMatchObject({ Stored: 1, Orphaned: 2, HeldKeys: 1 });
  });

  it('ignores other media and LoRA adapters, stored or removed', () => {
    const c = fleet(native);
    apply(c, 0, [
      stored([101n, 102n], null, tokensOf(2), { medium: 'CPU' }),
      stored([201n, 202n], null, tokensOf(2), { loraId: 3 }),
    ]);
    expect(held(c, 2)).toBe(0);
    apply(c, 0, [stored([101n, 102n], null, tokensOf(2), { medium: null })]);
    expect(held(c, 2)).toBe(2);
    apply(c, 0, [removed([101n, 102n], 'CPU')]);
    expect(held(c, 2)).toBe(2);
    expect(stats(c, 0)).toMatchObject({ Ignored: 6, Stored: 2, Removed: 0, HeldKeys: 2 });
  });

  it('removes known hashes, counts unknown ones, and the walk stops at the first miss', () => {
    const c = fleet(native);
    apply(c, 0, [stored([101n, 102n, 103n, 104n], null, tokensOf(4))]);
    apply(c, 0, [removed([103n, 555n])]);
    expect(held(c, 4)).toBe(2);
    expect(stats(c, 0)).toMatchObject({ Removed: 1, UnknownRemoved: 1, HeldKeys: 3, EngineBlocks: 3 });
  });

  it('clears the slot on AllBlocksCleared, keeping the counters', () => {
    const c = fleet(native);
    apply(c, 0, [stored([101n, 102n], null, tokensOf(2)), cleared]);
    expect(held(c, 2)).toBe(0);
    expect(stats(c, 0)).toMatchObject({ Stored: 2, Cleared: 1, HeldKeys: 0, EngineBlocks: 0 });
    // A parent from before the clear is unknown now.
    apply(c, 0, [stored([103n], 102n, tokensOf(3).subarray(2 * BS))]);
    expect(stats(c, 0)).toMatchObject({ Orphaned: 1 });
  });

  it('keeps a key held while any of the engine hashes naming it is', () => {
    const c = fleet(native);
    apply(c, 0, [stored([101n], null, tokensOf(1)), stored([201n], null, tokensOf(1))]);
    expect(stats(c, 0)).toMatchObject({ HeldKeys: 1, EngineBlocks: 2 });
    apply(c, 0, [removed([101n])]);
    expect(held(c, 1)).toBe(1);
    apply(c, 0, [removed([201n])]);
    expect(held(c, 1)).toBe(0);
    expect(stats(c, 0)).toMatchObject({ HeldKeys: 0, EngineBlocks: 0, Removed: 2 });
  });

  it('treats a re-stored engine hash as idempotent', () => {
    const c = fleet(native);
    apply(c, 0, [stored([101n], null, tokensOf(1)), stored([101n], null, tokensOf(1))]);
    expect(stats(c, 0)).toMatchObject({ Stored: 2, HeldKeys: 1, EngineBlocks: 1 });
    apply(c, 0, [removed([101n])]);
    expect(held(c, 1)).toBe(0);
  });

  it('answers from events only for fed slots and FLAG_TOKEN_KEYS requests; contents survive the switch', () => {
    const c = fleet(native, 1);
    c.core.setEventFed(1, true);
    apply(c, 0, [stored([101n, 102n], null, tokensOf(2))]);
    expect(matchOf(c, keysOf(2), 2, { inputTokens: 9 })).toEqual([2, 0]);
    expect(matchOf(c, keysOf(2), 2, { inputTokens: 9, flags: 0 })).toEqual([0, 0]);
    c.core.setEventFed(0, false);
    apply(c, 0, [stored([103n], 102n, tokensOf(3).subarray(2 * BS))]); // still fed into the index
    expect(matchOf(c, keysOf(3), 2, { inputTokens: 13 })).toEqual([0, 0]);
    c.core.setEventFed(0, true);
    expect(matchOf(c, keysOf(3), 2, { inputTokens: 13 })).toEqual([3, 0]);
    c.core.clearKvEvents(0);
    expect(matchOf(c, keysOf(3), 2, { inputTokens: 13 })).toEqual([0, 0]);
    expect(stats(c, 0)).toMatchObject({ Stored: 3, HeldKeys: 0 });
  });

  it('routes to the event-fed holder, still committing the belief index', () => {
    const c = fleet(native, 2);
    for (const s of [1, 2]) c.core.setEventFed(s, true);
    apply(c, 2, [stored([101n, 102n, 103n, 104n, 105n, 106n], null, tokensOf(6))]);
    setRequest(c, { inputTokens: 6 * BS + 2 });
    const ticket = c.core.route(keysOf(6), undefined);
    expect(ticket).toBeGreaterThanOrEqual(0);
    expect(c.buffers.decision[0]).toBe(2);
    expect(Array.from(c.matched.subarray(0, 3))).toEqual([0, 0, 6]);
    // The belief index of slot 2 now holds the request too (what it answers when not fed).
    c.core.setEventFed(2, false);
    expect(matchOf(c, keysOf(6), 3, { inputTokens: 6 * BS + 2 })).toEqual([0, 0, 6]);
    expect(c.core.checkInvariants()).toBe('');
  });

  it('dry runs answer from events too and change nothing', () => {
    const c = fleet(native);
    apply(c, 0, [stored([101n, 102n], null, tokensOf(2))]);
    setRequest(c, { inputTokens: 9, flags: FLAG_TOKEN_KEYS | FLAG_DRY_RUN });
    expect(c.core.route(keysOf(2), undefined)).toBe(-1);
    expect(c.matched[0]).toBe(2);
    c.core.setEventFed(0, false);
    expect(matchOf(c, keysOf(2), 1, { inputTokens: 9 })).toEqual([0]);
  });

  it('resets a slot when its instance is removed or added', () => {
    const c = fleet(native);
    apply(c, 0, [stored([101n, 102n], null, tokensOf(2)), removed([7n])]);
    c.core.removeInstance(0);
    expect(c.core.addInstance('engine-new', 100)).toBe(0);
    expect(stats(c, 0)).toEqual({
      Stored: 0,
      Removed: 0,
      Cleared: 0,
      Ignored: 0,
      Orphaned: 0,
      UnknownRemoved: 0,
      HeldKeys: 0,
      EngineBlocks: 0,
      EventFed: 0,
    });
    c.core.setEventFed(0, true);
    expect(held(c, 2)).toBe(0);
    expect(c.core.checkInvariants()).toBe('');
  });

  it('serves more than 56 instances: mask slots and higher slots walk together', () => {
    const c = makeCore(native, { blockTokens: BS });
    for (let k = 0; k < 64; k++) c.core.addInstance(`engine-${k}`, 1000);
    const fed = [0, 5, 55, 56, 57, 63];
    fed.forEach((s) => c.core.setEventFed(s, true));
    // Slot s holds the first (s % 7) + 1 blocks.
    const depth = (s: number) => (s % 7) + 1;
    fed.forEach((s) =>
      apply(c, s, [
        stored(
          Array.from({ length: depth(s) }, (_, j) => BigInt(1000 * s + j)),
          null,
          tokensOf(depth(s)),
        ),
      ]),
    );
    const got = matchOf(c, keysOf(8), 64, { inputTokens: 8 * BS + 1 });
    fed.forEach((s) => expect(got[s], `slot ${s}`).toBe(depth(s)));
    expect(got.filter((_, s) => !fed.includes(s)).every((m) => m === 0)).toBe(true);
    setRequest(c, { inputTokens: 8 * BS + 1 });
    c.core.route(keysOf(8), undefined);
    expect(c.core.checkInvariants()).toBe('');
  });
});

describe.each(IMPLEMENTATIONS)('bad packed events ($impl)', ({ native }) => {
  const TYPE = { name: 'TypeError', code: 'ERR_KVROUTE_INVALID_ARG_TYPE' };
  const VALUE = { name: 'RangeError', code: 'ERR_KVROUTE_INVALID_ARG_VALUE' };
  const packed = (ops: number[], hashes: bigint[] = [], tokens: number[] = []): PackedKvEvents => ({
    ops: Uint32Array.from(ops),
    opsLength: ops.length,
    hashes: BigUint64Array.from(hashes),
    hashesLength: hashes.length,
    tokens: Uint32Array.from(tokens),
    tokensLength: tokens.length,
  });
  const S = PACKED_OP_STORED;
  const R = PACKED_OP_REMOVED;
  const C = PACKED_OP_CLEARED;
  const four = [1, 2, 3, 4];

  it.each<[string, unknown, { name: string; code: string }, string]>([
    ['not an object', 5, TYPE, 'packed must be an object (PackedKvEvents)'],
    ['ops of the wrong kind', { ...packed([]), ops: new Int32Array(4) }, TYPE, 'packed.ops must be a Uint32Array'],
    [
      'hashes as a Float64Array',
      { ...packed([]), hashes: new Float64Array(1) },
      TYPE,
      'packed.hashes must be a BigUint64Array',
    ],
    ['a missing length', { ...packed([]), tokensLength: undefined }, TYPE, 'packed.tokensLength must be a number'],
    [
      'a length past its array',
      { ...packed([C, 0, 0, 0]), opsLength: 8 },
      VALUE,
      'packed.opsLength must be an integer in [0, ops.length = 4], got 8',
    ],
    [
      'a fractional length',
      { ...packed([], [1n]), hashesLength: 0.5 },
      VALUE,
      'packed.hashesLength must be an integer in [0, hashes.length = 1], got 0.5',
    ],
    [
      'a negative length',
      { ...packed([]), tokensLength: -1 },
      VALUE,
      'packed.tokensLength must be an integer in [0, tokens.length = 0], got -1',
    ],
    ['a partial record', packed([C, 0, 0]), VALUE, 'packed.opsLength must be a multiple of 4, got 3'],
    ['an unknown op', packed([C, 0, 0, 0, 9, 0, 0, 0]), VALUE, 'packed.ops[4]: unknown op 9'],
    [
      'stored flags out of range',
      packed([S, 8, 0, 4]),
      VALUE,
      'packed.ops[1]: flags 8 are not valid for a BlockStored record',
    ],
    ['a block size of 0', packed([S, 0, 0, 0]), VALUE, 'packed.ops[3]: block size must be in [1, 16777216], got 0'],
    [
      'a block size past 2^24',
      packed([S, 0, 0, 2 ** 24 + 1]),
      VALUE,
      'packed.ops[3]: block size must be in [1, 16777216], got 16777217',
    ],
    [
      'removed with a parent flag',
      packed([R, 1, 0, 0]),
      VALUE,
      'packed.ops[1]: flags 1 are not valid for a BlockRemoved record',
    ],
    [
      'removed with a block size',
      packed([R, 0, 0, 4]),
      VALUE,
      'packed.ops[3]: must be 0 in a BlockRemoved record, got 4',
    ],
    [
      'cleared with a count',
      packed([C, 0, 2, 0]),
      VALUE,
      'packed.ops[2]: must be 0 in an AllBlocksCleared record, got 2',
    ],
    [
      'hashes running out',
      packed([S, 1, 1, 4], [1n], four),
      VALUE,
      'packed.ops[2]: the records need 2 hashes, hashesLength is 1',
    ],
    [
      'tokens running out',
      packed([S, 0, 2, 4], [1n, 2n], four),
      VALUE,
      'packed.ops[2]: the records need 8 tokens, tokensLength is 4',
    ],
    [
      'a count of 2^32 - 1',
      packed([R, 0, 2 ** 32 - 1, 0], [1n]),
      VALUE,
      'packed.ops[2]: the records need 4294967295 hashes, hashesLength is 1',
    ],
    ['hashes left over', packed([R, 0, 1, 0], [1n, 2n]), VALUE, 'packed.hashesLength is 2 but the records use 1'],
    [
      'tokens left over',
      packed([S, 0, 1, 4], [1n], [...four, 5]),
      VALUE,
      'packed.tokensLength is 5 but the records use 4',
    ],
  ])('%s is refused whole, changing nothing', (_, bad, kind, message) => {
    const c = fleet(native);
    const before = stats(c, 0);
    // A valid record ahead of the bad one is not applied either.
    const error = thrown(() => c.core.applyKvEvents(0, bad as PackedKvEvents));
    expect(error).toMatchObject(kind);
    expect(error.message).toBe(message);
    expect(stats(c, 0)).toEqual(before);
    expect(c.core.checkInvariants()).toBe('');
  });

  it('a stream bad in its last record applies none of the earlier ones', () => {
    const c = fleet(native);
    const bad = packed([S, 0, 1, 4, R, 0, 0, 7], [1n], four);
    expect(thrown(() => c.core.applyKvEvents(0, bad)).message).toBe(
      'packed.ops[7]: must be 0 in a BlockRemoved record, got 7',
    );
    expect(stats(c, 0)).toMatchObject({ Stored: 0, HeldKeys: 0 });
  });

  it('refuses a slot that is not live, and non-boolean fed flags', () => {
    const c = fleet(native);
    expect(thrown(() => c.core.applyKvEvents(3, packed([])))).toMatchObject({ code: 'ERR_KVROUTE_UNKNOWN_INSTANCE' });
    expect(thrown(() => c.core.clearKvEvents(3))).toMatchObject({ code: 'ERR_KVROUTE_UNKNOWN_INSTANCE' });
    expect(thrown(() => c.core.setEventFed(0, 1 as never))).toMatchObject({ ...TYPE, message: 'on must be a boolean' });
  });

  it.each([4, 0.5, -1, NaN])('request flags %s are refused', (flags) => {
    const c = fleet(native);
    setRequest(c, { flags });
    const error = thrown(() => c.core.route(keysOf(1), undefined));
    expect(error).toMatchObject(VALUE);
    expect(error.message).toBe(`flags must be an integer in [0, 3], got ${flags}`);
  });
});

describe('random packed streams', () => {
  it('are refused or applied alike by both cores, never read out of bounds', () => {
    // Mostly well-formed records with one word or length disturbed now and then, so both the
    // checks and the application run; whatever the stream, the addon must not crash, and the two
    // cores must throw the same message or reach the same counters.
    let state = 12345;
    const next = (n: number) => {
      state = (Math.imul(state, 1103515245) + 12345) >>> 0;
      return state % n;
    };
    const cores = [makeCore(true, { blockTokens: 2 }), makeCore(false, { blockTokens: 2 })];
    for (const c of cores) {
      c.core.addInstance('engine-0', 100);
      c.core.setEventFed(0, true);
    }
    let refused = 0;
    for (let round = 0; round < 400; round++) {
      const ops: number[] = [];
      let hashes = 0;
      let tokens = 0;
      for (let r = next(4); r > 0; r--) {
        const op = [PACKED_OP_STORED, PACKED_OP_REMOVED, PACKED_OP_CLEARED][next(3)]!;
        const count = next(4);
        const flags = op === PACKED_OP_STORED ? next(8) : op === PACKED_OP_REMOVED ? 2 * next(2) : 0;
        const bs = op === PACKED_OP_STORED ? 1 + next(3) : 0;
        ops.push(op, flags, op === PACKED_OP_CLEARED ? 0 : count, bs);
        if (op !== PACKED_OP_CLEARED) hashes += count + (op === PACKED_OP_STORED && flags & 1 ? 1 : 0);
        if (op === PACKED_OP_STORED) tokens += count * bs;
      }
      if (next(3) === 0 && ops.length > 0) ops[next(ops.length)] = [0, 1, 5, 2 ** 32 - 1, 2 ** 24 + 1][next(5)]!;
      const p: PackedKvEvents = {
        ops: Uint32Array.from(ops),
        opsLength: ops.length,
        hashes: BigUint64Array.from({ length: hashes + 2 }, () => BigInt(next(6))),
        hashesLength: next(5) === 0 ? hashes + next(3) : hashes,
        tokens: Uint32Array.from({ length: tokens + 2 }, () => next(3)),
        tokensLength: next(5) === 0 ? Math.max(0, tokens - next(3)) : tokens,
      };
      const outcomes = cores.map((c) => {
        try {
          c.core.applyKvEvents(0, p);
          return stats(c, 0);
        } catch (error) {
          return (error as Error).message;
        }
      });
      expect(outcomes[0], `round ${round}`).toEqual(outcomes[1]);
      if (typeof outcomes[0] === 'string') refused += 1;
    }
    expect(refused).toBeGreaterThan(40);
    expect(refused).toBeLessThan(360);
    for (const c of cores) expect(c.core.checkInvariants()).toBe('');
  });
});
