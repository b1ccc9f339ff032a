/**
 * The summary.json of one sweep cell: what `kvroute sim run --json` prints (runMetrics with its
 * per-instance TTFT p90, makespan, preemptions, evictions, and the engine model: preset,
 * engine_scaling, capacity_blocks, and `prediction`: the router's predicted cached tokens against
 * the engine's, prediction-accuracy.ts, and the offload figures: offloads, offloaded_ttft_mean_s,
 * transfer_s_mean, transferred_tokens, offload-metrics.ts) plus `slow`, the slow requests by
 * cause at the default SLO, as `kvroute analyze run` labels them (slow-causes.ts), and, when
 * the records carry tenants (flow control), `flow_metrics` (flow-metrics.ts), as `sim run --json`
 * prints it. The reuse split is left out: it walks the whole trace once per cell; `kvroute
 * analyze run --trace` gives it for any cell's records.
 */
import { flowMetrics } from '../analysis/flow-metrics.js';
import { offloadMetrics } from '../analysis/offload-metrics.js';
import { predictionAccuracy } from '../analysis/prediction-accuracy.js';
import { runMetrics } from '../analysis/run-metrics.js';
import { DEFAULT_SLO, labelSlowRequests } from '../analysis/slow-causes.js';
import type { RequestRecord } from '../trace/records.js';
import type { CellSummary, EngineFacts } from './sweep-layout.js';

export interface RunTotals {
  /** Virtual (sim) or wall (live) seconds from the first dispatch to the last completion. */
  makespan: number;
  preemptions: number;
  evictions: number;
}

export function cellSummary(
  records: readonly RequestRecord[],
  totals: RunTotals,
  instances?: number,
  engine?: EngineFacts,
): CellSummary {
  const summary: CellSummary = {
    ...runMetrics(records),
    makespan_s: totals.makespan,
    preemptions: totals.preemptions,
    evictions: totals.evictions,
    ...offloadMetrics(records),
    ...engine,
    prediction: predictionAccuracy(records),
  };
  const flow = flowMetrics(records);
  if (flow !== undefined) summary.flow_metrics = flow;
  return extendCellSummary(summary, records, instances);
}

/** Adds the slow requests by cause (kvroute analyze run's `slow`) for a fleet of `instances`. */
export function extendCellSummary(
  summary: CellSummary,
  records: readonly RequestRecord[],
  instances?: number,
): CellSummary {
  return { ...summary, slow: labelSlowRequests(records, DEFAULT_SLO, instances).summary };
}
