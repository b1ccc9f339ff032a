/**
 * `kvroute analyze run`: the metrics of a record file (replay or sim run), with the keys of
 * `sim run --json` (run-metrics.ts) plus the run's span and preemptions from the records and
 * the slow requests by cause (slow-causes.ts). Evictions are the simulator's engine counter
 * and are not in records: null here.
 */
import type { RecordFile } from '../trace/record-file.js';
import type { EngineStates } from './engine-state-samples.js';
import { runMetrics, type RunMetrics } from './run-metrics.js';
import type { RunReuse } from './run-reuse.js';
import { DEFAULT_SLO, labelSlowRequests, type Slo, type SlowSummary } from './slow-causes.js';

export interface RunAnalysis extends RunMetrics {
  /** Last finish − first dispatch, seconds. */
  makespan_s: number;
  /** Σ preemptions over the records. */
  preemptions: number;
  evictions: null;
  slow: SlowSummary;
  /** Where the cached tokens came from; null without the trace (run-reuse.ts). */
  reuse: RunReuse | null;
}

export function analyzeRun(
  file: RecordFile,
  slo: Slo = DEFAULT_SLO,
  reuse: RunReuse | null = null,
  engineStates?: EngineStates,
): RunAnalysis {
  const { records } = file;
  let first = Infinity;
  let last = -Infinity;
  let preemptions = 0;
  for (const r of records) {
    first = Math.min(first, r.dispatch);
    last = Math.max(last, r.finish);
    preemptions += r.preemptions;
  }
  return {
    ...runMetrics(records),
    makespan_s: records.length === 0 ? 0 : last - first,
    preemptions,
    evictions: null,
    slow: labelSlowRequests(records, slo, file.header?.instances, engineStates).summary,
    reuse,
  };
}
