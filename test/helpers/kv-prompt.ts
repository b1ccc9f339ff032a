/**
 * One small prompt and the KV events of an engine that cached part of it, for tests of event-fed
 * routing: 70 tokens (4 full blocks of 16, then a partial one), and `storedThree`, the engine
 * storing its first 3 blocks under its own hashes 11, 12 and 13 (two events, the second chained
 * to the first by its parent hash).
 */
import type { PublishedKvEvent } from '../../src/sim/kv-event-encoding.js';

export const prompt = Uint32Array.from({ length: 70 }, (_, i) => 1000 + i);

/** Block k's 16 token ids. */
export const block = (k: number): number[] => Array.from(prompt.subarray(16 * k, 16 * (k + 1)));

export const storedThree: PublishedKvEvent[] = [
  {
    type: 'BlockStored',
    blockHashes: [11, 12],
    parentBlockHash: null,
    tokenIds: [...block(0), ...block(1)],
    blockSize: 16,
  },
  { type: 'BlockStored', blockHashes: [13], parentBlockHash: 12, tokenIds: block(2), blockSize: 16 },
];
