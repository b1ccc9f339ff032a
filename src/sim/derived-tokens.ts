/**
 * Token ids for a block that has none (docs/kv-events.md, "Blocks without tokens"): a simulated
 * engine serving `hash_ids` or hashed text has block ids but no token ids, and a BlockStored event
 * must carry exactly `block_size` of them. They are derived from the block id alone, so the same
 * id always gives the same tokens and a router can recompute them:
 *
 *   seed  = low 32 bits of u64(id) XOR (high 32 bits × 0x9E3779B9), as u32
 *   token = the next mulberry32 output of that seed, modulo DERIVED_TOKEN_VOCAB, block_size times
 *
 * u64(id) is the id as an unsigned 64-bit integer (a negative trace id wraps, as it does on the
 * wire). Two different ids give different token runs except by a 2^-32-ish accident.
 */

/** Qwen3's vocabulary size: derived token ids are below it. */
export const DERIVED_TOKEN_VOCAB = 151_936;

const TWO_32 = 4294967296;

/** The `blockSize` token ids derived from block `id` (a safe integer). */
export function derivedBlockTokens(id: number, blockSize: number): number[] {
  const tokens = new Array<number>(blockSize);
  writeDerivedBlockTokens(id, blockSize, tokens, 0);
  return tokens;
}

/**
 * A prompt's tokens as a simulated engine's KV events describe them: each block of `hashIds` its
 * derived tokens, cut to `inputLength` (the partial last block keeps only its first tokens, so
 * the prompt keys to the full blocks the engine caches, and no more).
 */
export function derivedPromptTokens(hashIds: ArrayLike<number>, blockSize: number, inputLength: number): Uint32Array {
  const tokens = new Uint32Array(hashIds.length * blockSize);
  for (let block = 0; block < hashIds.length; block++)
    writeDerivedBlockTokens(hashIds[block]!, blockSize, tokens, block * blockSize);
  return tokens.subarray(0, Math.min(inputLength, tokens.length));
}

/** Writes block `id`'s derived tokens into `out` from `offset` (derivedBlockTokens' loop). */
function writeDerivedBlockTokens(
  id: number,
  blockSize: number,
  out: { [index: number]: number },
  offset: number,
): void {
  const u64 = id < 0 ? BigInt.asUintN(64, BigInt(id)) : undefined;
  const low = u64 === undefined ? (id % TWO_32) >>> 0 : Number(u64 & 0xffffffffn);
  const high = u64 === undefined ? Math.floor(id / TWO_32) >>> 0 : Number(u64 >> 32n);
  let state = (low ^ Math.imul(high, 0x9e3779b9)) >>> 0;
  for (let i = 0; i < blockSize; i++) {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[offset + i] = ((t ^ (t >>> 14)) >>> 0) % DERIVED_TOKEN_VOCAB;
  }
}
