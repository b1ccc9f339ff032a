/**
 * The summary.json of one sweep cell: today what `kvroute sim run --json` prints (runMetrics,
 * makespan, preemptions, evictions). `extendCellSummary` is the one place where the run
 * analysis (`kvroute analyze run`: slow requests and their causes, per-instance TTFT p90, reuse
 * decomposition) joins it once that lands on main; tables read those fields when present.
 */
import { runMetrics } from '../analysis/run-metrics.js';
import type { RequestRecord } from '../trace/records.js';
import type { CellSummary } from './sweep-layout.js';

export interface RunTotals {
  /** Virtual (sim) or wall (live) seconds from the first dispatch to the last completion. */
  makespan: number;
  preemptions: number;
  evictions: number;
}

export function cellSummary(records: readonly RequestRecord[], totals: RunTotals): CellSummary {
  const summary: CellSummary = {
    ...runMetrics(records),
    makespan_s: totals.makespan,
    preemptions: totals.preemptions,
    evictions: totals.evictions,
  };
  return extendCellSummary(summary, records);
}

/**
 * TODO(analyze-run): add `slow` ({ n_slow, causes }), `per_instance` and `reuse` from the run
 * analysis (src/analysis/run-analysis.ts on the analyze-run branch) here. The B3 table shows
 * n_slow and the causes when `slow` is present, "-" otherwise (sweep-tables.ts).
 */
export function extendCellSummary(summary: CellSummary, _records: readonly RequestRecord[]): CellSummary {
  return summary;
}
