/**
 * What `kvroute tune --objective` can minimize: a latency percentile of a run (RunMetrics,
 * src/analysis/run-metrics.ts) or, with flow control on, a figure of its tenants (FlowMetrics,
 * src/analysis/flow-metrics.ts), and how the per-trace values combine into one objective.
 * Loaded by every `kvroute` run (tune-command.ts lists the names), so it imports types only;
 * the worker (tune-point.ts) reduces the records to PointMetrics.
 */
import type { Quantiles, RunMetrics } from '../analysis/run-metrics.js';

/** Flow control's figures of a run, as a tune point sends them back (absent without flow control). */
export interface PointFlow {
  /** The highest TTFT p90 of a tenant with an answered request (worstTenant); 0 when none was answered. */
  worst_tenant_ttft_p90_s: number;
  /** Requests refused, over all tenants. */
  refused: number;
}

/** The figures of a run a tune point sends back from its worker. */
export type PointMetrics = Pick<RunMetrics, 'requests' | 'ttft_s' | 'e2e_s' | 'tpot_ms' | 'apc'> & {
  flow?: PointFlow;
};

interface Objective {
  /** The unit of the value, as the result and the tables print it. */
  unit: 's' | 'ms' | '%';
  /** Measured only with flow control on (`--max-in-flight`): the records carry tenants. */
  needsFlow: boolean;
  value: (metrics: PointMetrics) => number;
}

const latency = (metric: 'ttft_s' | 'e2e_s' | 'tpot_ms', quantile: keyof Quantiles): Objective => ({
  unit: metric === 'tpot_ms' ? 'ms' : 's',
  needsFlow: false,
  value: (m) => m[metric][quantile],
});

/** An objective read from PointFlow; a point without it is a bug (tuneOptions refuses such a run). */
const ofFlow = (unit: Objective['unit'], read: (flow: PointFlow, requests: number) => number): Objective => ({
  unit,
  needsFlow: true,
  value: (m) => {
    if (m.flow === undefined) throw new Error('a flow objective on a run without flow control');
    return read(m.flow, m.requests);
  },
});

/** Every objective, lower is better. */
export const OBJECTIVES = {
  ttft_p50: latency('ttft_s', 'p50'),
  ttft_p90: latency('ttft_s', 'p90'),
  ttft_p99: latency('ttft_s', 'p99'),
  e2e_p50: latency('e2e_s', 'p50'),
  e2e_p90: latency('e2e_s', 'p90'),
  e2e_p99: latency('e2e_s', 'p99'),
  tpot_p50: latency('tpot_ms', 'p50'),
  tpot_p90: latency('tpot_ms', 'p90'),
  tpot_p99: latency('tpot_ms', 'p99'),
  /**
   * The worst-served tenant's TTFT p90 (from arrival at the router, so counting its wait for a
   * slot). Hazard: a tenant refused outright has no TTFT and does not count; watch refused_pct.
   */
  worst_tenant_ttft_p90: ofFlow('s', (flow) => flow.worst_tenant_ttft_p90_s),
  /** Requests refused by flow control (deadline, rate limit), % of the run's requests. */
  refused_pct: ofFlow('%', (flow, requests) => (requests === 0 ? 0 : (flow.refused / requests) * 100)),
} as const satisfies Record<string, Objective>;

export type ObjectiveName = keyof typeof OBJECTIVES;
export const OBJECTIVE_NAMES = Object.keys(OBJECTIVES) as ObjectiveName[];

/** How a point's per-trace values become its objective: their mean, or the worst (largest). */
export const AGGREGATES = ['mean', 'worst'] as const;
export type Aggregate = (typeof AGGREGATES)[number];

export function objectiveValue(name: ObjectiveName, metrics: PointMetrics): number {
  return OBJECTIVES[name].value(metrics);
}

export function aggregate(how: Aggregate, values: readonly number[]): number {
  if (how === 'worst') return Math.max(...values);
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}
