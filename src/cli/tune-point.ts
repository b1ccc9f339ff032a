/**
 * One `kvroute tune` evaluation: a policy setting on one trace, simulated exactly as a sweep
 * cell is (simulateFile in sweep-cell.ts), reduced to the figures an objective reads. Runs on a
 * Piscina worker (sweep-worker.ts, export `tunePoint`); the records never leave the worker. With
 * flow control on, the tenants' figures (flow-metrics.ts) come back too, for the flow objectives.
 */
import { flowMetrics, refusedRequests, worstTenant } from '../analysis/flow-metrics.js';
import { runMetrics } from '../analysis/run-metrics.js';
import type { TraceReadStats } from '../trace/read-trace.js';
import { simulateFile, type SimFileRun } from './sweep-cell.js';
import type { PointFlow, PointMetrics } from './tune-objectives.js';

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
  const flow = flowMetrics(result.records);
  const pointFlow: PointFlow | undefined =
    flow === undefined
      ? undefined
      : {
          worst_tenant_ttft_p90_s: worstTenant(flow)?.ttft_p90_s ?? 0,
          refused: refusedRequests(flow),
        };
  return {
    metrics: { requests, ttft_s, e2e_s, tpot_ms, apc, ...(pointFlow === undefined ? {} : { flow: pointFlow }) },
    fingerprint,
    readStats,
    wall_s: (performance.now() - started) / 1000,
  };
}
