// @ts-check
// A realistic stream of one vLLM engine's KV event messages for the kv-events bench, as msgpack
// payloads in vLLM's positional encoding: 16-token blocks; BlockStored runs of 1 to 64 blocks
// (a prefill's new blocks), most continuing a conversation's last block (parent known), some
// from the root; BlockRemoved runs of 1 to 64 of the oldest held blocks (LRU eviction) making
// about 30% of the block events; 1 to 8 events per message, as an engine step publishes them.
import { Packr } from 'msgpackr';

export const BLOCK_TOKENS = 16;
const SESSIONS = 256;
const REMOVAL_SHARE = 0.3; // of events; runs of both kinds average 32.5 blocks

/** mulberry32: seeded, so every run benches the same stream. @param {number} seed */
function random(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * @param {number} blockEvents how many stored + removed blocks to generate (at least)
 * @returns {{ payloads: Uint8Array[], blockEvents: number, storedBlocks: number, removedBlocks: number }}
 */
export function generateKvEventStream(blockEvents, seed = 17) {
  const rnd = random(seed);
  const int = (/** @type {number} */ lo, /** @type {number} */ hi) => lo + Math.floor(rnd() * (hi - lo + 1));
  const packr = new Packr({ useRecords: false });
  /** @type {(bigint | null)[]} */
  const tails = new Array(SESSIONS).fill(null);
  /** @type {bigint[]} */
  const fifo = []; // held hashes, oldest first
  let head = 0;
  let next = 0x9e3779b97f4a7c15n;
  const newHash = () => {
    next = (next * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn;
    return next;
  };
  /** @type {Uint8Array[]} */
  const payloads = [];
  let stored = 0;
  let removed = 0;
  while (stored + removed < blockEvents) {
    /** @type {unknown[]} */
    const events = [];
    for (let e = int(1, 8); e > 0; e--) {
      const n = int(1, 64);
      if (rnd() < REMOVAL_SHARE && fifo.length - head > n) {
        events.push(['BlockRemoved', fifo.slice(head, head + n), 'GPU']);
        head += n;
        removed += n;
        continue;
      }
      const s = int(0, SESSIONS - 1);
      const parent = rnd() < 0.8 ? tails[s] : null;
      const hashes = Array.from({ length: n }, newHash);
      const tokens = Array.from({ length: n * BLOCK_TOKENS }, () => int(0, 151_000));
      events.push(['BlockStored', hashes, parent ?? null, tokens, BLOCK_TOKENS, null, 'GPU']);
      tails[s] = /** @type {bigint} */ (hashes[n - 1]);
      for (const h of hashes) fifo.push(h);
      stored += n;
    }
    if (head > 1 << 16) {
      fifo.splice(0, head);
      head = 0;
    }
    payloads.push(packr.pack([payloads.length * 0.01, events, null]));
  }
  return { payloads, blockEvents: stored + removed, storedBlocks: stored, removedBlocks: removed };
}
