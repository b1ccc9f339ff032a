/**
 * Two runs of one trace side by side, the seeds' cmp_es (ES_ABLATION_RESULTS.md): run A is the
 * baseline (es0, shadow counters), run B the variant (es1, real state).
 *
 * - Requests are matched by (session, turn); reroute % = matched requests whose instance
 *   differs ÷ matched requests.
 * - Instances per session, TTFT p90 and TTFT mean of each run, and the change A → B in %.
 * - Verdict on the TTFT p90 change, in the seeds' words: HELPS at ≤ −5 %, HURTS at ≥ +5 %, wash
 *   between. The seeds print no thresholds; ±5 % is the band that reproduces their verdicts
 *   (sticky −26 % HELPS; unified+A+B +1.8 % and v3 +1.5 % wash; lmetric +16.6 % and load_only
 *   +27 % HURTS). Their unified_kv_both +44 % "worse" they call single-pair run variance.
 *
 * Failed live requests (status other than 200, or an error) count for rerouting but not for
 * TTFT. O(n) time with one Map of A's (session, turn) keys.
 */
import type { RequestRecord } from '../trace/records.js';
import { percentileOfSorted } from './percentiles.js';

export const VERDICT_THRESHOLDS = { helps_at_or_below_pct: -5, hurts_at_or_above_pct: 5 } as const;

export type Verdict = 'HELPS' | 'wash' | 'HURTS';

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

const key = (r: RequestRecord): string => `${r.session}\u0000${r.turn}`;

const failed = (r: RequestRecord): boolean => (r.status !== undefined && r.status !== 200) || r.error !== undefined;

interface Side {
  instancesPerSession: number;
  ttftP90: number;
  ttftMean: number;
}

function side(records: readonly RequestRecord[]): Side {
  const sessions = new Map<string, Set<number>>();
  const ttft: number[] = [];
  for (const r of records) {
    let instances = sessions.get(r.session);
    if (instances === undefined) sessions.set(r.session, (instances = new Set()));
    instances.add(r.instance);
    if (!failed(r)) ttft.push(r.first_token - r.dispatch);
  }
  let perSession = 0;
  for (const instances of sessions.values()) perSession += instances.size;
  const sorted = Float64Array.from(ttft).sort();
  let sum = 0;
  for (const t of sorted) sum += t;
  return {
    instancesPerSession: sessions.size === 0 ? 0 : perSession / sessions.size,
    ttftP90: percentileOfSorted(sorted, 90),
    ttftMean: sorted.length === 0 ? 0 : sum / sorted.length,
  };
}

const change = (a: number, b: number): number | null => (a === 0 ? null : ((b - a) / a) * 100);

/** The seeds' word for a TTFT p90 change of `changePct` % (null: no verdict). */
export function verdictOf(changePct: number | null): Verdict | null {
  if (changePct === null) return null;
  if (changePct <= VERDICT_THRESHOLDS.helps_at_or_below_pct) return 'HELPS';
  if (changePct >= VERDICT_THRESHOLDS.hurts_at_or_above_pct) return 'HURTS';
  return 'wash';
}

/** Compares run `b` against baseline `a` (same trace; the caller checks fingerprints). */
export function comparePairedRuns(a: readonly RequestRecord[], b: readonly RequestRecord[]): PairedComparison {
  const instanceOf = new Map<string, number>();
  for (const r of a) instanceOf.set(key(r), r.instance);
  let matched = 0;
  let rerouted = 0;
  for (const r of b) {
    const before = instanceOf.get(key(r));
    if (before === undefined) continue;
    matched++;
    if (before !== r.instance) rerouted++;
  }
  const sa = side(a);
  const sb = side(b);
  const p90Change = change(sa.ttftP90, sb.ttftP90);
  return {
    matched,
    rerouted,
    reroute_pct: matched === 0 ? 0 : (rerouted / matched) * 100,
    instances_per_session_a: sa.instancesPerSession,
    instances_per_session_b: sb.instancesPerSession,
    ttft_p90_a: sa.ttftP90,
    ttft_p90_b: sb.ttftP90,
    ttft_p90_change_pct: p90Change,
    ttft_mean_a: sa.ttftMean,
    ttft_mean_b: sb.ttftMean,
    ttft_mean_change_pct: change(sa.ttftMean, sb.ttftMean),
    verdict: verdictOf(p90Change),
    thresholds: VERDICT_THRESHOLDS,
  };
}
