// @ts-check
// A long-context agentic coding workload: sessions that open with a shared
// system prompt plus a large repository context, then grow turn by turn as
// tool outputs are appended, each turn resending the whole conversation.
// Ids are random 64-bit values, like real prompt hashes.
//
// Shape (16-token blocks): system prefix 128 blocks (2K tokens); first turn
// 2,000–2,600 blocks (32–42K tokens); each later turn appends 20–120 blocks
// (tool output of 320–1,920 tokens) after completing the previous turn's
// partial last block; 8–30 turns. Prompts average about 3,000 ids.

/**
 * @typedef {import('./measure.mjs').BenchRequest} BenchRequest
 * @typedef {{ name: string, ids: bigint[], turnsLeft: number }} Session
 */

const BLOCK_TOKENS = 16;
const SYSTEM_BLOCKS = 128;

/** xorshift64* over BigInt: a fast, seeded stream of 64-bit ids. */
function idStream(/** @type {bigint} */ seed) {
  let x = seed || 1n;
  const mask = (1n << 64n) - 1n;
  return () => {
    x ^= x >> 12n;
    x ^= (x << 25n) & mask;
    x ^= x >> 27n;
    return (x * 0x2545f4914f6cdd1dn) & mask;
  };
}

/** mulberry32 for the workload's shape decisions. */
function rng(/** @type {number} */ seed) {
  let s = seed >>> 0;
  return (/** @type {number} */ min, /** @type {number} */ max) => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return min + Math.floor((((t ^ (t >>> 14)) >>> 0) / 4294967296) * (max - min + 1));
  };
}

/**
 * @param {{ seed: number, historicSessions: number, requests: number, concurrentSessions: number }} o
 * @returns {{ warmup: BenchRequest[], measured: BenchRequest[] }}
 */
export function agenticWorkload(o) {
  const nextId = idStream(BigInt(o.seed) * 0x9e3779b97f4a7c15n);
  const int = rng(o.seed);
  const system = Array.from({ length: SYSTEM_BLOCKS }, nextId);
  let sessionCount = 0;
  const fresh = (/** @type {number} */ n) => Array.from({ length: n }, nextId);
  /** @param {Session} s @returns {BenchRequest} */
  const request = (s) => ({
    hashIds: BigUint64Array.from(s.ids),
    session: s.name,
    inputTokens: s.ids.length * BLOCK_TOKENS - int(0, BLOCK_TOKENS - 1),
  });
  /** @returns {Session} */
  const open = () => ({
    name: `session-${sessionCount++}`,
    ids: [...system, ...fresh(int(2000, 2600) - SYSTEM_BLOCKS)],
    turnsLeft: int(8, 30),
  });

  // Sessions that ran before measurement began: their prompts fill the caches.
  const warmup = Array.from({ length: o.historicSessions }, () => request(open()));

  /** @type {Session[]} */
  const live = Array.from({ length: o.concurrentSessions }, open);
  /** @type {BenchRequest[]} */
  const measured = [];
  const fresh0 = new Set(live);
  while (measured.length < o.requests) {
    const k = int(0, live.length - 1);
    const s = /** @type {Session} */ (live[k]);
    if (fresh0.has(s)) {
      fresh0.delete(s);
    } else {
      s.ids = [...s.ids.slice(0, -1), ...fresh(int(20, 120) + 1)];
    }
    measured.push(request(s));
    s.turnsLeft -= 1;
    if (s.turnsLeft <= 0) {
      live[k] = open();
      fresh0.add(/** @type {Session} */ (live[k]));
    }
  }
  return { warmup, measured };
}
