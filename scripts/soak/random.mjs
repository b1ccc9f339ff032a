// @ts-check
/**
 * The soak's seeded randomness: one mulberry32 stream per use, so a seed replays the same fault
 * schedule, the same prompts and the same stream/non-stream mix (timing still varies run to run).
 */

/**
 * A generator of floats in [0, 1) from a 32-bit seed (mulberry32).
 * @param {number} seed
 * @returns {() => number}
 */
export function seededRandom(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * A copy of `items` in a seeded random order (Fisher–Yates).
 * @template T
 * @param {readonly T[]} items
 * @param {() => number} random
 * @returns {T[]}
 */
export function shuffled(items, random) {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = /** @type {[T, T]} */ ([out[j], out[i]]);
  }
  return out;
}

/** @param {number} ms */
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `predicate` every `everyMs` until it holds or `timeoutMs` passes; resolves with whether it held.
 * @param {() => boolean | Promise<boolean>} predicate
 * @param {number} timeoutMs
 * @param {number} [everyMs]
 * @returns {Promise<boolean>}
 */
export async function until(predicate, timeoutMs, everyMs = 200) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (await predicate()) return true;
    } catch {
      // a failed probe counts as "not yet"
    }
    if (Date.now() >= deadline) return false;
    await sleep(everyMs);
  }
}
