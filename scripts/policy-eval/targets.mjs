// @ts-check
// Issue #28's targets, checked per regime from scripts/policy-eval.mjs's cells: the default
// policy's TTFT p90 within 1% of every other policy's best, ≥ 10% below the best existing
// policy's where the regime asks for it (mixed fleets, misstated costs), its APC within 1 pp of
// the best, its hotspot index no worse than unified's. Pure: cells in, rows and their records
// out. The table is rendered from the records by src/report/evaluation-targets.ts (the same
// table `kvroute report` shows).
//
// "Existing" policies are those of the evaluation before issue #28 (sets.mjs EXISTING_POLICIES)
// other than the default, plus the variants marked `existing` (the default as it was, e.g.
// `min_ttft (fixed costs)`). A regime whose means lack the default or unified is an error.

/** Targets, as fractions. */
export const TARGETS = Object.freeze({
  /** The default's TTFT p90 may exceed the best other policy's by at most this. */
  withinBest: 0.01,
  /** Where `beatsExisting`: the default's TTFT p90 at least this far below the best existing. */
  belowExisting: 0.1,
  /** The default's APC may trail the best APC by at most this (1 pp). */
  apcPoints: 0.01,
});

/**
 * @typedef {{ seed: number, ttft_p90: number, apc: number, hotspot: number }} Run
 * @typedef {{ policy: string, ttft: number, apc: number, hotspot: number }} Mean
 * @typedef {{
 *   regime: string,
 *   mine: Mean,
 *   rank: number,
 *   of: number,
 *   bestOther: Mean,
 *   bestExisting: Mean,
 *   bestApc: number,
 *   unified: Mean,
 *   beatsExisting: boolean,
 *   pass: { best: boolean, existing: boolean | undefined, apc: boolean, hotspot: boolean },
 * }} TargetRow
 */

const mean = (/** @type {number[]} */ xs) => xs.reduce((a, x) => a + x, 0) / xs.length;

/**
 * @param {string} regime
 * @param {Record<string, Run[]>} byPolicy the regime's runs by policy (or variant) name
 * @param {{ defaultPolicy: string, existing: string[], beatsExisting: boolean }} context
 * @returns {TargetRow}
 */
export function checkTargets(regime, byPolicy, { defaultPolicy, existing, beatsExisting }) {
  /** @type {Mean[]} */
  const rows = Object.entries(byPolicy).map(([policy, runs]) => ({
    policy,
    ttft: mean(runs.map((r) => r.ttft_p90)),
    apc: mean(runs.map((r) => r.apc)),
    hotspot: mean(runs.map((r) => r.hotspot)),
  }));
  rows.sort((a, b) => a.ttft - b.ttft);
  const mine = rows.find((r) => r.policy === defaultPolicy);
  const others = rows.filter((r) => r.policy !== defaultPolicy);
  const olds = others.filter((r) => existing.includes(r.policy));
  const unified = rows.find((r) => r.policy === 'unified');
  if (mine === undefined || unified === undefined || others[0] === undefined || olds[0] === undefined)
    throw new Error(`${regime}: the default policy, unified or every other policy is missing`);
  const bestApc = Math.max(...rows.map((r) => r.apc));
  return {
    regime,
    mine,
    rank: rows.indexOf(mine) + 1,
    of: rows.length,
    bestOther: others[0],
    bestExisting: olds[0],
    bestApc,
    unified,
    beatsExisting,
    pass: {
      best: mine.ttft <= others[0].ttft * (1 + TARGETS.withinBest),
      existing: beatsExisting ? mine.ttft <= olds[0].ttft * (1 - TARGETS.belowExisting) : undefined,
      apc: mine.apc >= bestApc - TARGETS.apcPoints,
      hotspot: mine.hotspot <= unified.hotspot,
    },
  };
}

/**
 * The JSON form of a row, for the evaluation file's `targets` (src/report/evaluation-targets.ts
 * TargetRecord; `pass.existing` is left out where the target does not apply).
 * @param {TargetRow} r
 * @returns {import('../../src/report/evaluation-targets.js').TargetRecord}
 */
export function targetRecord(r) {
  const brief = (/** @type {Mean} */ m) => ({ policy: m.policy, ttft_p90: m.ttft, apc: m.apc, hotspot: m.hotspot });
  return {
    default: brief(r.mine),
    rank: r.rank,
    of: r.of,
    best_other: brief(r.bestOther),
    best_existing: brief(r.bestExisting),
    best_apc: r.bestApc,
    unified: brief(r.unified),
    pass: {
      best: r.pass.best,
      ...(r.pass.existing === undefined ? {} : { existing: r.pass.existing }),
      apc: r.pass.apc,
      hotspot: r.pass.hotspot,
    },
  };
}
