/**
 * Chained prompt block ids, the twin of native/hash/prompt-hash.cc
 * (docs/hashing.md): id[0] = XXH64(chunk[0], 0), id[k] = XXH64(chunk[k], id[k-1]),
 * over the UTF-8 bytes in chunks of `chunkBytes`, the last chunk partial.
 */
import { xxhash64 } from './xxhash64.js';

const encoder = new TextEncoder();

export function hashPromptBytes(bytes: Uint8Array, chunkBytes: number): bigint[] {
  const ids: bigint[] = [];
  let parent = 0n;
  for (let start = 0; start < bytes.length; start += chunkBytes) {
    parent = xxhash64(bytes.subarray(start, Math.min(bytes.length, start + chunkBytes)), parent);
    ids.push(parent);
  }
  return ids;
}

export function hashPrompt(text: string, chunkBytes: number): bigint[] {
  return hashPromptBytes(encoder.encode(text), chunkBytes);
}
