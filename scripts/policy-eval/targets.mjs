// @ts-check
// Issue #28's targets, checked per regime from scripts/policy-eval.mjs's cells: the default
// policy's TTFT p90 within 1% of every other policy's best, ≥ 10% below the best existing
// policy's where the regime asks for it (mixed fleets, misstated costs), its APC within 1 pp of
// the best, its hotspot index no worse than unified's. Pure: cells in, rows and Markdown out.
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

const fmt = (/** @type {number} */ x, digits = 2) => x.toFixed(digits);
const pct = (/** @type {number} */ x) => `${x > 0 ? '+' : x < 0 ? '−' : ''}${fmt(Math.abs(100 * x), 1)}%`;
/** ✓ or ✗ after a cell; nothing when the target does not apply. */
const mark = (/** @type {boolean | undefined} */ ok) => (ok === undefined ? '' : ok ? ' ✓' : ' ✗');

/**
 * The Markdown table of `rows`, then one line per target: how many regimes meet it.
 * @param {TargetRow[]} rows
 * @param {{ label: string, defaultPolicy: string }} context
 */
export function targetsTable(rows, { label, defaultPolicy }) {
  const d = defaultPolicy;
  const lines = [
    `| ${label} | ${d} TTFT p90 s | rank | best other | ${d} vs best other (≤ +1%) | best existing | ${d} vs best existing (≤ −10% where marked) | APC ${d} / best (≤ 1 pp behind) | hotspot ${d} / unified (≤) |`,
    '|---|---:|---:|---|---:|---|---:|---:|---:|',
  ];
  for (const r of rows) {
    const vsBest = (r.mine.ttft - r.bestOther.ttft) / r.bestOther.ttft;
    const vsExisting = (r.mine.ttft - r.bestExisting.ttft) / r.bestExisting.ttft;
    lines.push(
      `| ${r.regime} | ${fmt(r.mine.ttft)} | ${r.rank} of ${r.of} | ${r.bestOther.policy} ${fmt(r.bestOther.ttft)} | ` +
        `${pct(vsBest)}${mark(r.pass.best)} | ${r.bestExisting.policy} ${fmt(r.bestExisting.ttft)} | ` +
        `${pct(vsExisting)}${mark(r.pass.existing)} | ${fmt(100 * r.mine.apc, 1)}% / ${fmt(100 * r.bestApc, 1)}%${mark(r.pass.apc)} | ` +
        `${fmt(r.mine.hotspot)} / ${fmt(r.unified.hotspot)}${mark(r.pass.hotspot)} |`,
    );
  }
  const count = (/** @type {(r: TargetRow) => boolean | undefined} */ f) => {
    const applicable = rows.filter((r) => f(r) !== undefined);
    return `${applicable.filter((r) => f(r) === true).length} of ${applicable.length}`;
  };
  lines.push(
    '',
    `- best TTFT p90 (within 1% of every other policy): ${count((r) => r.pass.best)} regimes`,
    `- ≥ 10% below the best existing policy (mixed fleets, misstated costs): ${count((r) => r.pass.existing)} regimes`,
    `- APC within 1 pp of the best: ${count((r) => r.pass.apc)} regimes`,
    `- hotspot index ≤ unified's: ${count((r) => r.pass.hotspot)} regimes`,
  );
  return lines;
}

/**
 * The JSON form of a row, for the evaluation file's `targets`.
 * @param {TargetRow} r
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
    pass: r.pass,
  };
}
