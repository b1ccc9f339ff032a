/**
 * `kvroute analyze run`: the metrics of a record file (replay or sim run), with the keys of
 * `sim run --json` (run-metrics.ts) plus the run's span and preemptions from the records and
 * the slow requests by cause (slow-causes.ts). Evictions are the simulator's engine counter
 * and are not in records: null here. The engine model (preset, engine_scaling,
 * capacity_blocks) comes from the run header: null when it does not say (replay, older files).
 * `prediction` compares the router's predicted cached tokens with the engine's
 * (prediction-accuracy.ts): null when no record carries a prediction. The offload figures
 * (offloads, offloaded_ttft_mean_s, …: offload-metrics.ts) come from records that name a
 * prefill instance.
 */
import type { RecordFile } from '../trace/record-file.js';
import type { EngineScalingRecord } from '../trace/records.js';
import type { EngineStates } from './engine-state-samples.js';
import { offloadMetrics, type OffloadMetrics } from './offload-metrics.js';
import { predictionAccuracy, type PredictionAccuracy } from './prediction-accuracy.js';
import { runMetrics, type RunMetrics } from './run-metrics.js';
import type { RunReuse } from './run-reuse.js';
import { DEFAULT_SLO, labelSlowRequests, type Slo, type SlowSummary } from './slow-causes.js';

export interface RunAnalysis extends RunMetrics, OffloadMetrics {
  /** Last finish − first dispatch, seconds. */
  makespan_s: number;
  /** Σ preemptions over the records. */
  preemptions: number;
  evictions: null;
  preset: string | null;
  engine_scaling: EngineScalingRecord | null;
  capacity_blocks: number | null;
  /** How min_ttft priced the instances (sim run --costs), from the header; null when it does not say. */
  costs: string | null;
  /** Whether min_ttft counted sessions between turns (sim run), from the header; null when it does not say. */
  session_returns: boolean | null;
  slow: SlowSummary;
  /** The router's predicted cached tokens against the engine's; null when no record has a prediction. */
  prediction: PredictionAccuracy | null;
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
    ...offloadMetrics(records),
    preset: file.header?.preset ?? null,
    engine_scaling: file.header?.engine_scaling ?? null,
    capacity_blocks: file.header?.capacity_blocks ?? null,
    costs: file.header?.costs ?? null,
    session_returns: file.header?.session_returns ?? null,
    slow: labelSlowRequests(records, slo, file.header?.instances, engineStates).summary,
    prediction: predictionAccuracy(records),
    reuse,
  };
}
