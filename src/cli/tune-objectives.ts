/**
 * What `kvroute tune --objective` can minimize: a latency percentile of a run (RunMetrics,
 * src/analysis/run-metrics.ts), and how the per-trace values combine into one objective.
 * Loaded by every `kvroute` run (tune-command.ts lists the names), so it imports types only.
 */
import type { Quantiles, RunMetrics } from '../analysis/run-metrics.js';

/** The figures of a run a tune point sends back from its worker. */
export type PointMetrics = Pick<RunMetrics, 'requests' | 'ttft_s' | 'e2e_s' | 'tpot_ms' | 'apc'>;

interface Objective {
  /** The unit of the value, as RunMetrics has it. */
  unit: 's' | 'ms';
  metric: 'ttft_s' | 'e2e_s' | 'tpot_ms';
  quantile: keyof Quantiles;
}

const objective = (metric: Objective['metric'], quantile: keyof Quantiles): Objective => ({
  unit: metric === 'tpot_ms' ? 'ms' : 's',
  metric,
  quantile,
});

/** Every objective, lower is better. */
export const OBJECTIVES = {
  ttft_p50: objective('ttft_s', 'p50'),
  ttft_p90: objective('ttft_s', 'p90'),
  ttft_p99: objective('ttft_s', 'p99'),
  e2e_p50: objective('e2e_s', 'p50'),
  e2e_p90: objective('e2e_s', 'p90'),
  e2e_p99: objective('e2e_s', 'p99'),
  tpot_p50: objective('tpot_ms', 'p50'),
  tpot_p90: objective('tpot_ms', 'p90'),
  tpot_p99: objective('tpot_ms', 'p99'),
} as const satisfies Record<string, Objective>;

export type ObjectiveName = keyof typeof OBJECTIVES;
export const OBJECTIVE_NAMES = Object.keys(OBJECTIVES) as ObjectiveName[];

/** How a point's per-trace values become its objective: their mean, or the worst (largest). */
export const AGGREGATES = ['mean', 'worst'] as const;
export type Aggregate = (typeof AGGREGATES)[number];

export function objectiveValue(name: ObjectiveName, metrics: PointMetrics): number {
  const { metric, quantile } = OBJECTIVES[name];
  return metrics[metric][quantile];
}

export function aggregate(how: Aggregate, values: readonly number[]): number {
  if (how === 'worst') return Math.max(...values);
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}
