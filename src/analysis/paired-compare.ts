/**
 * Two runs of one trace side by side, flat, as the sweep's ES ablation table lays them out: run
 * A is the baseline (es0, shadow counters), run B the variant (es1, real state). The comparison
 * itself is `compareRuns` (compare-runs.ts, the ES ablation's cmp_es, also `kvroute analyze compare`):
 * one definition of reroute %, the TTFT changes and the verdict for both.
 */
import type { RequestRecord } from '../trace/records.js';
import { compareRuns, VERDICT_THRESHOLDS, type Verdict } from './compare-runs.js';

export { VERDICT_THRESHOLDS, verdictOf, type Verdict } from './compare-runs.js';

export interface PairedComparison {
  /** Requests of B with a (session, turn) in A. */
  matched: number;
  rerouted: number;
  reroute_pct: number;
  instances_per_session_a: number;
  instances_per_session_b: number;
  ttft_p90_a: number;
  ttft_p90_b: number;
  /** null when A's figure is 0. */
  ttft_p90_change_pct: number | null;
  ttft_mean_a: number;
  ttft_mean_b: number;
  ttft_mean_change_pct: number | null;
  verdict: Verdict | null;
  thresholds: typeof VERDICT_THRESHOLDS;
}

/** Compares run `b` against baseline `a` (same trace; the caller checks fingerprints). */
export function comparePairedRuns(a: readonly RequestRecord[], b: readonly RequestRecord[]): PairedComparison {
  const c = compareRuns(a, b);
  return {
    matched: c.matched,
    rerouted: c.rerouted,
    reroute_pct: c.reroute_pct,
    instances_per_session_a: c.a.instances_per_session,
    instances_per_session_b: c.b.instances_per_session,
    ttft_p90_a: c.a.ttft_p90_s,
    ttft_p90_b: c.b.ttft_p90_s,
    ttft_p90_change_pct: c.ttft_p90_change_pct,
    ttft_mean_a: c.a.ttft_mean_s,
    ttft_mean_b: c.b.ttft_mean_s,
    ttft_mean_change_pct: c.ttft_mean_change_pct,
    verdict: c.verdict,
    thresholds: c.thresholds,
  };
}
