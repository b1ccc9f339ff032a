/**
 * Token block keys, the TypeScript twin of native/hash/token-keys.cc (docs/hashing.md): for tokens
 * t[0..n) and block size bs, floor(n / bs) keys; key[0] = XXH64(block 0's tokens as u32
 * little-endian bytes, seed = bs, or the parent's key when the chain continues one), key[k] =
 * XXH64(block k's bytes, seed = key[k - 1]). BigInt arithmetic: the oracle, not a hot path.
 */
import { xxhash64 } from './xxhash64.js';

/** The key of the block tokens[at .. at + blockSize), chained from `seed`. */
export function tokenBlockKey(tokens: ArrayLike<number>, at: number, blockSize: number, seed: bigint): bigint {
  const bytes = new Uint8Array(blockSize * 4);
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < blockSize; i += 1) view.setUint32(4 * i, tokens[at + i]!, true);
  return xxhash64(bytes, seed);
}

/** floor(tokens.length / blockSize) chained keys; the first seeded by parentKey, else blockSize. */
export function hashTokenBlocks(tokens: ArrayLike<number>, blockSize: number, parentKey?: bigint): bigint[] {
  const count = Math.floor(tokens.length / blockSize);
  const keys = new Array<bigint>(count);
  let seed = parentKey ?? BigInt(blockSize);
  for (let k = 0; k < count; k += 1) {
    seed = tokenBlockKey(tokens, k * blockSize, blockSize, seed);
    keys[k] = seed;
  }
  return keys;
}
