/**
 * Hashing for callers outside route(): the same chained ids the router computes for a `prompt`
 * or `messages` request, and token block keys, the keys of the event-fed index (docs/hashing.md).
 */
import { invalidType, invalidValue } from './errors.js';
import { loadNative, nativeDisabledByEnv } from './native.js';
import { hashPrompt as referenceHashPrompt } from './reference/prompt-hash.js';
import { hashTokenBlocks as referenceHashTokenBlocks } from './reference/token-keys.js';
import { checkInteger, checkString } from './validate.js';

export interface HashPromptOptions {
  /** Bytes per chunk (default 128). */
  chunkBytes?: number;
  /** false uses the TypeScript reference. Default: the addon unless KVROUTE_NATIVE=0. */
  native?: boolean;
}

/** Chained 64-bit block ids of `text`'s UTF-8 bytes: ceil(bytes / chunkBytes) of them. */
export function hashPrompt(text: string, options: HashPromptOptions = {}): BigUint64Array {
  checkString('text', text);
  const chunkBytes =
    options.chunkBytes === undefined ? 128 : checkInteger('chunkBytes', options.chunkBytes, 1, 1 << 24);
  const native = options.native ?? !nativeDisabledByEnv();
  return native
    ? loadNative().hashPrompt(text, chunkBytes)
    : BigUint64Array.from(referenceHashPrompt(text, chunkBytes));
}

const MAX_U64 = (1n << 64n) - 1n;

/**
 * Token block keys of `tokens`: floor(tokens.length / blockSize) chained XXH64 keys, one per full
 * block, key[0] seeded by `parentKey` when the chain continues a block (a BlockStored event's
 * known parent), else by blockSize (docs/hashing.md, "Token block keys"). A request flagged
 * FLAG_TOKEN_KEYS carries these as its ids. `options.native: false` uses the TypeScript reference.
 */
export function hashTokenBlocks(
  tokens: Uint32Array,
  blockSize: number,
  parentKey?: bigint,
  options: { native?: boolean } = {},
): BigUint64Array {
  if (!(tokens instanceof Uint32Array)) throw invalidType('tokens', 'a Uint32Array', tokens);
  checkInteger('blockSize', blockSize, 1, 1 << 24);
  if (parentKey !== undefined) {
    if (typeof parentKey !== 'bigint') throw invalidType('parentKey', 'a bigint or undefined', parentKey);
    if (parentKey < 0n || parentKey > MAX_U64) throw invalidValue('parentKey', 'a u64 (0 to 2^64 - 1)', parentKey);
  }
  const native = options.native ?? !nativeDisabledByEnv();
  return native
    ? loadNative().hashTokenBlocks(tokens, blockSize, parentKey)
    : BigUint64Array.from(referenceHashTokenBlocks(tokens, blockSize, parentKey));
}
