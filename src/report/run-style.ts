/**
 * How the report tells runs apart and which one it calls best: one colour per run, the same in
 * every figure, and the best run by one stated criterion.
 *
 * Colours: Vega's tableau10 up to 10 runs, tableau20 up to 20 (its dark/light pairs fall on a
 * sweep's adjacent policy-shadow/policy-shm cells), and beyond that hues spaced evenly around
 * the HSL wheel with alternating lightness. Invariant: N runs get N distinct colours (Vega's
 * own nominal scale cycles its 10 colours, so two runs shared one past the tenth).
 *
 * Best run: the lowest TTFT p90 (the figure the ES verdicts and the policy evaluation judge
 * by), ties to the higher APC, then to the earlier run. None with fewer than two runs.
 */
import type { ReportCell, ReportInput } from './report-input.js';

/** Vega's tableau10, in its order. */
const TABLEAU10 = [
  '#4c78a8',
  '#f58518',
  '#e45756',
  '#72b7b2',
  '#54a24b',
  '#eeca3b',
  '#b279a2',
  '#ff9da6',
  '#9d755d',
  '#bab0ac',
];

/** Vega's tableau20: ten hues, each dark then light. */
const TABLEAU20 = [
  '#4c78a8',
  '#9ecae9',
  '#f58518',
  '#ffbf79',
  '#54a24b',
  '#88d27a',
  '#b79a20',
  '#f2cf5b',
  '#439894',
  '#83bcb6',
  '#e45756',
  '#ff9d98',
  '#79706e',
  '#bab0ac',
  '#d67195',
  '#fcbfd2',
  '#b279a2',
  '#d6a5c9',
  '#9e765f',
  '#d8b5a5',
];

/** `n` distinct colours, one per run, in run order. */
export function runColours(n: number): string[] {
  if (n <= TABLEAU10.length) return TABLEAU10.slice(0, n);
  if (n <= TABLEAU20.length) return TABLEAU20.slice(0, n);
  return Array.from({ length: n }, (_, i) => `hsl(${((360 * i) / n).toFixed(1)}, 65%, ${i % 2 === 0 ? 42 : 62}%)`);
}

/** The criterion, as the report states it next to the highlight. */
export const BEST_RUN_CRITERION = 'lowest TTFT p90 (ties: higher APC)';

/** The id of the best run, or undefined with fewer than two runs. */
export function bestRunId(cells: readonly ReportCell[]): string | undefined {
  if (cells.length < 2) return undefined;
  let best = cells[0]!;
  for (const cell of cells.slice(1)) {
    const [a, b] = [cell.summary, best.summary];
    if (a.ttft_s.p90 < b.ttft_s.p90 || (a.ttft_s.p90 === b.ttft_s.p90 && a.apc > b.apc)) best = cell;
  }
  return best.id;
}

/** A Vega expression that is true for the best run's axis or legend label. */
function isBestLabel(best: string): string {
  return `datum.value === ${JSON.stringify(best)}`;
}

/** A legend's label properties: the best run's label starred. */
export function bestLegendLabel(best: string | undefined): Record<string, unknown> {
  return best === undefined ? {} : { labelExpr: `${isBestLabel(best)} ? '★ ' + datum.label : datum.label` };
}

/** An axis' label properties: the best run's label starred and bold. */
export function bestAxisLabel(best: string | undefined): Record<string, unknown> {
  if (best === undefined) return {};
  return {
    ...bestLegendLabel(best),
    labelFontWeight: { condition: { test: isBestLabel(best), value: 'bold' }, value: 'normal' },
  };
}

/** A nominal colour scale's domain and range: each run's colour, the same in every figure. */
export function runScale(input: ReportInput): { domain: string[]; range: string[] } {
  const domain = input.cells.map((cell) => cell.id);
  return { domain, range: runColours(domain.length) };
}

/** The y encoding of a figure whose rows name their run in `cell`: horizontal labels, the best starred and bold. */
export function runAxis(input: ReportInput): Record<string, unknown> {
  return { field: 'cell', type: 'nominal', title: null, sort: null, axis: bestAxisLabel(bestRunId(input.cells)) };
}
