/**
 * Token block keys (docs/hashing.md): the addon and the TypeScript reference agree on random
 * token runs, block sizes and parent keys; both follow the definition as computed with an
 * independent XXH64 (xxhash-wasm); a continued chain equals the tail of the whole chain; partial
 * blocks get no key; bad arguments are refused naming the field.
 */
import xxhash from 'xxhash-wasm';
import { beforeAll, describe, expect, it } from 'vitest';

import { hashTokenBlocks } from '../src/core/hashing.js';
import { Rng } from './helpers/random.js';
import { thrown } from './helpers/routers.js';

function randomTokens(rng: Rng, n: number): Uint32Array {
  // Small ids, large ids and the u32 extremes, so every byte lane is exercised.
  return Uint32Array.from({ length: n }, () =>
    rng.chance(0.1) ? rng.pick([0, 0xffffffff, 0x80000000]) : rng.int(0, rng.chance(0.5) ? 200_000 : 0xffffffff),
  );
}

describe('hashTokenBlocks', () => {
  let wasm: Awaited<ReturnType<typeof xxhash>>;
  beforeAll(async () => {
    wasm = await xxhash();
  });

  it('follows the definition: XXH64 of each block as u32 little-endian, seeded by bs, then by the previous key', () => {
    const rng = new Rng(17);
    for (let round = 0; round < 200; round++) {
      const bs = rng.pick([1, 2, 3, 16, 17, 64, 512]);
      const tokens = randomTokens(rng, rng.int(0, bs * 6 + bs - 1));
      const parent = rng.chance(0.3) ? rng.u64() : undefined;
      const expected: bigint[] = [];
      let seed = parent ?? BigInt(bs);
      for (let k = 0; (k + 1) * bs <= tokens.length; k++) {
        const bytes = new Uint8Array(bs * 4);
        const view = new DataView(bytes.buffer);
        for (let i = 0; i < bs; i++) view.setUint32(4 * i, tokens[k * bs + i]!, true);
        seed = wasm.h64Raw(bytes, seed);
        expected.push(seed);
      }
      expect(Array.from(hashTokenBlocks(tokens, bs, parent, { native: true }))).toEqual(expected);
      expect(Array.from(hashTokenBlocks(tokens, bs, parent, { native: false }))).toEqual(expected);
    }
  });

  it('agrees between the addon and the reference on 1,000 random inputs', () => {
    const rng = new Rng(4242);
    for (let round = 0; round < 1000; round++) {
      const bs = rng.int(1, 40);
      const tokens = randomTokens(rng, rng.int(0, 300));
      const parent = rng.chance(0.5) ? rng.u64() : undefined;
      const native = hashTokenBlocks(tokens, bs, parent, { native: true });
      expect(native.length).toBe(Math.floor(tokens.length / bs));
      expect(native).toEqual(hashTokenBlocks(tokens, bs, parent, { native: false }));
    }
  });

  it('keys a continued chain as the tail of the whole chain, and never a partial block', () => {
    const rng = new Rng(9);
    const bs = 16;
    const tokens = randomTokens(rng, 10 * bs + 5);
    const whole = hashTokenBlocks(tokens, bs);
    expect(whole.length).toBe(10);
    const tail = hashTokenBlocks(tokens.subarray(4 * bs), bs, whole[3]);
    expect(Array.from(tail)).toEqual(Array.from(whole.subarray(4)));
    expect(hashTokenBlocks(tokens.subarray(0, bs - 1), bs).length).toBe(0);
    // A root block is not keyed like the same tokens continuing a chain.
    expect(hashTokenBlocks(tokens.subarray(4 * bs, 5 * bs), bs)[0]).not.toBe(whole[4]);
  });

  const two = new Uint32Array(2);
  it.each<[string, (o: { native: boolean }) => unknown, string, string]>([
    [
      'tokens as an array',
      (o) => hashTokenBlocks([1, 2] as never, 1, undefined, o),
      'TypeError',
      'tokens must be a Uint32Array',
    ],
    [
      'a block size of 0',
      (o) => hashTokenBlocks(two, 0, undefined, o),
      'RangeError',
      'blockSize must be an integer in [1, 16777216], got 0',
    ],
    ['a fractional block size', (o) => hashTokenBlocks(two, 1.5, undefined, o), 'RangeError', 'blockSize must be'],
    [
      'a numeric parent',
      (o) => hashTokenBlocks(two, 1, 5 as never, o),
      'TypeError',
      'parentKey must be a bigint or undefined, got 5',
    ],
    ['a parent of 2^64', (o) => hashTokenBlocks(two, 1, 1n << 64n, o), 'RangeError', 'parentKey must be a u64'],
    ['a negative parent', (o) => hashTokenBlocks(two, 1, -1n, o), 'RangeError', 'parentKey must be a u64'],
  ])('refuses %s', (_, call, name, message) => {
    for (const native of [true, false]) {
      const error = thrown(() => call({ native }));
      expect(error.name).toBe(name);
      expect(error.message).toContain(message);
    }
  });
});
