/**
 * The addon's prefix trie against the TypeScript reference (src/trace/prefix-trie.ts): random
 * walks with shared prefixes, repeats, forks, ids near ±2^53, long requests and enough nodes
 * and branches to grow every structure, compared walk by walk (return value and path), batch by
 * batch, and node by node at the end. Then bad input: a TypeError or RangeError naming the
 * argument, and the trie unchanged.
 */
import { describe, expect, it } from 'vitest';

import { loadNative, type NativePrefixTrie } from '../src/core/native.js';
import { makePrefixTrie, nativeTrieByDefault } from '../src/trace/make-prefix-trie.js';
import { PrefixTrie, type BlockTrie } from '../src/trace/prefix-trie.js';
import { Rng } from './helpers/random.js';
import { thrown } from './helpers/routers.js';

const TYPE = { name: 'TypeError', code: 'ERR_KVROUTE_INVALID_ARG_TYPE' };
const VALUE = { name: 'RangeError', code: 'ERR_KVROUTE_INVALID_ARG_VALUE' };
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

const nativeTrie = (): NativePrefixTrie => new (loadNative().PrefixTrie)();

/**
 * Requests as agentic traces make them, and worse: sessions extending their own prompt,
 * forks from another session's prefix, a few shared system prefixes, exact repeats, prefixes
 * cut short, and ids from a small alphabet (the same id under many parents) or from the
 * extremes of the safe range.
 */
function randomRequests(rng: Rng, count: number, longEvery = 0): Float64Array[] {
  const id = (): number => {
    const roll = rng.next();
    if (roll < 0.5) return rng.int(0, 20);
    if (roll < 0.6) return MAX_SAFE - rng.int(0, 3);
    if (roll < 0.7) return -MAX_SAFE + rng.int(0, 3);
    if (roll < 0.75) return rng.int(-3, 3) + 2 ** 32 * rng.int(-2, 2);
    return rng.int(0, 0xffffffff) * 2 ** 21 + rng.int(0, 2 ** 21 - 1);
  };
  const systems = Array.from({ length: 4 }, () => Array.from({ length: rng.int(1, 6) }, id));
  const sessions: number[][] = [];
  const requests: Float64Array[] = [];
  for (let i = 0; i < count; i++) {
    let ids: number[];
    const roll = rng.next();
    if (sessions.length > 0 && roll < 0.5) {
      const s = rng.int(0, sessions.length - 1);
      ids = [...sessions[s]!];
      if (rng.chance(0.1)) ids.length = rng.int(0, ids.length); // cut short
      if (!rng.chance(0.1)) for (let k = rng.int(1, 8); k > 0; k--) ids.push(id());
      sessions[s] = ids;
    } else if (sessions.length > 0 && roll < 0.6) {
      ids = rng.pick(sessions).slice(0, rng.int(0, 12)); // fork
      for (let k = rng.int(0, 5); k > 0; k--) ids.push(id());
      sessions.push(ids);
    } else if (requests.length > 0 && roll < 0.65) {
      ids = [...rng.pick(requests)]; // exact repeat
    } else {
      ids = [...rng.pick(systems)].slice(0, rng.int(0, 6));
      for (let k = rng.int(0, 10); k > 0; k--) ids.push(id());
      sessions.push(ids);
    }
    if (longEvery > 0 && i % longEvery === longEvery - 1) for (let k = 0; k < 5000; k++) ids.push(id());
    requests.push(Float64Array.from(ids));
  }
  return requests;
}

/** [session, length, ids…] for each request, as the trie stage receives them. */
function toBatch(requests: Float64Array[], rng: Rng): Float64Array {
  const words = requests.reduce((sum, ids) => sum + 2 + ids.length, 0);
  const batch = new Float64Array(words);
  let at = 0;
  for (const ids of requests) {
    batch[at++] = rng.int(0, 0xffffffff);
    batch[at++] = ids.length;
    batch.set(ids, at);
    at += ids.length;
  }
  return batch;
}

/** The two walks of `ids` agree (checked cheaply; on a difference, shown in full). */
function expectSameWalk(native: BlockTrie, reference: BlockTrie, ids: Float64Array, label: unknown): void {
  const a = new Uint32Array(ids.length);
  const b = new Uint32Array(ids.length);
  const seen = native.walk(ids, a);
  const expected = reference.walk(ids, b);
  if (seen !== expected || !a.every((node, k) => node === b[k]))
    expect({ label, seen, path: [...a] }).toEqual({ label, seen: expected, path: [...b] });
}

function expectSameNodes(native: BlockTrie, reference: BlockTrie): void {
  expect(native.size).toBe(reference.size);
  for (let node = 0; node < reference.size; node++) {
    if (native.parentOf(node) !== reference.parentOf(node))
      expect({ node, parent: native.parentOf(node) }).toEqual({ node, parent: reference.parentOf(node) });
  }
}

describe('native PrefixTrie against the TypeScript reference', () => {
  it('walks identically request by request, and ends with the same nodes', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const rng = new Rng(seed);
      const native = nativeTrie();
      const reference = new PrefixTrie();
      const requests = randomRequests(rng, 4000, 997);
      for (const [r, ids] of requests.entries()) expectSameWalk(native, reference, ids, { seed, r });
      expectSameNodes(native, reference);
    }
  });

  it('grows past several node chunks and table doublings with identical results', () => {
    const rng = new Rng(99);
    const native = nativeTrie();
    const reference = new PrefixTrie();
    // 40,000 branches under a few shared stems (table entries), ~400,000 nodes (node chunks).
    const stems = Array.from({ length: 8 }, (_, s) => Float64Array.from({ length: 4 }, (_, k) => s * 10 + k));
    for (let i = 0; i < 40_000; i++) {
      const stem = stems[i % stems.length]!.subarray(0, rng.int(1, 4));
      const ids = new Float64Array(stem.length + rng.int(1, 16));
      ids.set(stem);
      for (let k = stem.length; k < ids.length; k++) ids[k] = rng.int(0, 2 ** 40);
      expectSameWalk(native, reference, ids, i);
      // Every so often a session's next turn: the whole prompt again, and more.
      if (i % 3 === 0) {
        const next = new Float64Array(ids.length + 3);
        next.set(ids);
        next.set([1, 2, 3], ids.length);
        expectSameWalk(native, reference, next, i);
      }
    }
    expect(native.size).toBeGreaterThan(300_000);
    expectSameNodes(native, reference);
    expect(native.bytes).toBeGreaterThan(native.size * 16);
  });

  it('walks a batch as the same requests one by one, and counts marked depths alike', () => {
    for (let seed = 11; seed <= 14; seed++) {
      const rng = new Rng(seed);
      const requests = randomRequests(rng, 3000, 0);
      const batch = toBatch(requests, rng);
      const native = nativeTrie();
      const reference = new PrefixTrie();
      const one = new PrefixTrie();
      // Batches of a few requests each, as the reader cuts them (some empty requests too).
      const cut = [0];
      for (let at = 0; at < batch.length;) {
        for (let n = rng.int(1, 40); n > 0 && at < batch.length; n--) at += 2 + batch[at + 1]!;
        cut.push(at);
      }
      const nativeSeen: number[] = [];
      const referenceSeen: number[] = [];
      for (let c = 1; c < cut.length; c++) {
        const part = batch.subarray(cut[c - 1], cut[c]);
        const seen = [new Uint32Array(part.length), new Uint32Array(part.length)];
        const paths = [new Uint32Array(part.length), new Uint32Array(part.length)];
        const n = native.walkBatch(part, seen[0]!, paths[0]!);
        expect(reference.walkBatch(part, seen[1]!, paths[1]!)).toBe(n);
        expect(paths[0]).toEqual(paths[1]);
        nativeSeen.push(...seen[0]!.subarray(0, n));
        referenceSeen.push(...seen[1]!.subarray(0, n));
      }
      expect(nativeSeen).toEqual(referenceSeen);
      expect(nativeSeen).toEqual(requests.map((ids) => one.walk(ids, new Uint32Array(ids.length))));
      expectSameNodes(native, reference);

      const counts = Uint8Array.from({ length: native.size - rng.int(0, 50) }, () => rng.pick([0, 1, 2, 3, 255]));
      for (const min of [0, 1, 2, 3, 255, 256, 1000]) {
        const a = new Uint32Array(native.size);
        const b = new Uint32Array(native.size);
        native.markedDepths(counts, min, a);
        reference.markedDepths(counts, min, b);
        expect(a).toEqual(b);
      }
    }
  });

  it('is what analysis walks unless KVROUTE_NATIVE=0', () => {
    expect(nativeTrieByDefault()).toBe(true);
    expect(makePrefixTrie(true)).toBeInstanceOf(loadNative().PrefixTrie);
    expect(makePrefixTrie(false)).toBeInstanceOf(PrefixTrie);
    const saved = process.env.KVROUTE_NATIVE;
    process.env.KVROUTE_NATIVE = '0';
    try {
      expect(nativeTrieByDefault()).toBe(false);
    } finally {
      if (saved === undefined) delete process.env.KVROUTE_NATIVE;
      else process.env.KVROUTE_NATIVE = saved;
    }
  });
});

describe('native PrefixTrie bad input', () => {
  /** A trie holding [1, 2, 3]: any failed call must leave exactly that. */
  function primed(): NativePrefixTrie {
    const trie = nativeTrie();
    trie.walk(Float64Array.of(1, 2, 3), new Uint32Array(3));
    return trie;
  }
  function expectUnchanged(trie: NativePrefixTrie): void {
    expect(trie.size).toBe(4);
    const path = new Uint32Array(4);
    expect(trie.walk(Float64Array.of(1, 2, 3, 4), path)).toBe(3);
    expect(path).toEqual(Uint32Array.of(1, 2, 3, 4));
  }

  it.each([
    ['an array', [1, 2]],
    ['a string', 'abc'],
    ['an Int32Array', new Int32Array(2)],
    ['a BigUint64Array', new BigUint64Array(2)],
    ['undefined', undefined],
  ])('ids as %s is a TypeError naming ids', (_, ids) => {
    const trie = primed();
    const error = thrown(() => trie.walk(ids as never, new Uint32Array(4)));
    expect(error).toMatchObject(TYPE);
    expect(error.message).toContain('ids must be a Float64Array');
    expectUnchanged(trie);
  });

  it.each([
    ['an Int32Array', new Int32Array(4)],
    ['a Float64Array', new Float64Array(4)],
    ['null', null],
  ])('path as %s is a TypeError naming path', (_, path) => {
    const trie = primed();
    const error = thrown(() => trie.walk(Float64Array.of(5), path as never));
    expect(error).toMatchObject(TYPE);
    expect(error.message).toContain('path must be a Uint32Array');
    expectUnchanged(trie);
  });

  it('a path shorter than the ids is a RangeError naming path', () => {
    const trie = primed();
    const error = thrown(() => trie.walk(Float64Array.of(1, 2, 3, 9), new Uint32Array(3)));
    expect(error).toMatchObject(VALUE);
    expect(error.message).toBe('path is too short: needs 4 entries, has 3');
    expectUnchanged(trie);
  });

  it.each([
    ['a non-integer', Float64Array.of(1, 2.5), 'ids[1]', 'got 2.5'],
    ['NaN', Float64Array.of(NaN), 'ids[0]', 'got NaN'],
    ['Infinity', Float64Array.of(1, 2, -Infinity), 'ids[2]', 'got -Infinity'],
    ['2^53', Float64Array.of(2 ** 53), 'ids[0]', 'got 9007199254740992'],
    ['-2^53', Float64Array.of(1, -(2 ** 53)), 'ids[1]', 'got -9007199254740992'],
  ])('%s id is a RangeError naming the element', (_, ids, field, got) => {
    const trie = primed();
    const error = thrown(() => trie.walk(ids, new Uint32Array(ids.length)));
    expect(error).toMatchObject(VALUE);
    expect(error.message).toContain(`${field} must be a safe integer`);
    expect(error.message).toContain(got);
    expectUnchanged(trie);
  });

  it('takes negative safe ids, as trace files may hold them (and the reference does)', () => {
    const ids = Float64Array.of(-1, -MAX_SAFE, 0, MAX_SAFE, -0);
    const native = nativeTrie();
    const reference = new PrefixTrie();
    for (let i = 0; i < 2; i++) {
      const a = new Uint32Array(ids.length);
      const b = new Uint32Array(ids.length);
      expect(native.walk(ids, a)).toBe(reference.walk(ids, b));
      expect(a).toEqual(b);
    }
    expect(native.size).toBe(6);
  });

  it.each([
    ['a negative session', [-1, 1, 5], 'batch[0]', "request 0's session"],
    ['a session of 2^32', [1, 0, 2 ** 32, 0], 'batch[2]', "request 1's session"],
    ['a fractional length', [1, 0.5, 5], 'batch[1]', "request 0's length"],
    ['a length past the end', [1, 1, 5, 2, 3, 6, 7], 'batch[4]', "request 1's length"],
    ['a missing length', [1, 1, 5, 2], 'batch[4]', "request 1's length"],
    ['a bad id', [1, 1, 5, 2, 2, 6, 0.25], 'batch[6]', 'must be a safe integer'],
  ])('a batch with %s is a RangeError naming the word', (_, words, field, what) => {
    const trie = primed();
    const error = thrown(() => trie.walkBatch(Float64Array.from(words), new Uint32Array(8), new Uint32Array(8)));
    expect(error).toMatchObject(VALUE);
    expect(error.message).toContain(field);
    expect(error.message).toContain(what);
    expectUnchanged(trie);
  });

  it('short or mistyped batch outputs are errors naming them, changing nothing', () => {
    const trie = primed();
    const batch = Float64Array.of(7, 2, 1, 9, 7, 0, 8, 1, 4);
    expect(thrown(() => trie.walkBatch(batch, new Uint32Array(2), new Uint32Array(9)))).toMatchObject({
      ...VALUE,
      message: 'seen is too short: needs 3 entries, has 2',
    });
    expect(thrown(() => trie.walkBatch(batch, new Uint32Array(3), new Uint32Array(8)))).toMatchObject({
      ...VALUE,
      message: 'paths is too short: needs 9 entries, has 8',
    });
    expect(thrown(() => trie.walkBatch(batch, new Int32Array(3) as never, new Uint32Array(9)))).toMatchObject({
      ...TYPE,
      message: 'seen must be a Uint32Array',
    });
    expect(thrown(() => trie.walkBatch([7, 0] as never, new Uint32Array(3), new Uint32Array(9)))).toMatchObject({
      ...TYPE,
      message: 'batch must be a Float64Array',
    });
    expectUnchanged(trie);
  });

  it('parentOf and markedDepths check their arguments', () => {
    const trie = primed();
    expect(trie.parentOf(3)).toBe(2);
    expect(trie.parentOf(0)).toBe(0);
    for (const node of [-1, 4, 1.5, NaN]) {
      const error = thrown(() => trie.parentOf(node));
      expect(error).toMatchObject(VALUE);
      expect(error.message).toContain('node');
    }
    expect(thrown(() => trie.parentOf('1' as never))).toMatchObject(TYPE);
    expect(thrown(() => trie.markedDepths(new Uint8Array(4), 1, new Uint32Array(3)))).toMatchObject({
      ...VALUE,
      message: 'depth is too short: needs 4 entries, has 3',
    });
    expect(thrown(() => trie.markedDepths([1, 1] as never, 1, new Uint32Array(4)))).toMatchObject(TYPE);
    expect(thrown(() => trie.markedDepths(new Uint8Array(4), -1, new Uint32Array(4)))).toMatchObject(VALUE);
    const depth = new Uint32Array(4);
    trie.markedDepths(Uint8Array.of(0, 3, 1, 3), 2, depth);
    expect(depth).toEqual(Uint32Array.of(0, 1, 1, 2));
  });
});
