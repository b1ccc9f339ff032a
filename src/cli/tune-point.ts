/**
 * One `kvroute tune` evaluation: a policy setting on one trace, simulated exactly as a sweep
 * cell is (simulateFile in sweep-cell.ts), reduced to the figures an objective reads. Runs on a
 * Piscina worker (sweep-worker.ts, export `tunePoint`); the records never leave the worker.
 */
import { runMetrics } from '../analysis/run-metrics.js';
import type { TraceReadStats } from '../trace/read-trace.js';
import { simulateFile, type SimFileRun } from './sweep-cell.js';
import type { PointMetrics } from './tune-objectives.js';

export type TunePointTask = SimFileRun;

export interface TunePointResult {
  metrics: PointMetrics;
  fingerprint: string;
  readStats: TraceReadStats;
  wall_s: number;
}

export async function runTunePoint(task: TunePointTask): Promise<TunePointResult> {
  const started = performance.now();
  const { result, fingerprint, readStats } = await simulateFile(task);
  const { requests, ttft_s, e2e_s, tpot_ms, apc } = runMetrics(result.records);
  return {
    metrics: { requests, ttft_s, e2e_s, tpot_ms, apc },
    fingerprint,
    readStats,
    wall_s: (performance.now() - started) / 1000,
  };
}
