/**
 * Two runs of the same trace side by side (the ES ablation's cmp_es): requests matched by
 * (session, turn); reroute % = matched requests whose instance differs ÷ matched requests;
 * instances per session, TTFT p90 and mean of each run (and its cached-token prediction accuracy,
 * when its records carry predictions), the change A → B in %, and a verdict
 * on the TTFT p90 change: HELPS at ≤ −5 %, HURTS at ≥ +5 %, wash between (docs/analysis.md).
 * The reference experiments print no thresholds; ±5 % is the band that reproduces their verdicts (sticky −26 %
 * HELPS; unified+A+B +1.8 % and v3 +1.5 % wash; lmetric +16.6 % and load_only +27 % HURTS).
 *
 * Runs of different traces are refused: different header fingerprints, or, when either file
 * has no header (kvroute 0.1), different (session, turn) sets. O(n) with one Map of A's keys.
 */
import type { RecordFile } from '../trace/record-file.js';
import type { RequestRecord } from '../trace/records.js';
import { percentileOfSorted } from './percentiles.js';
import { predictionAccuracy, type PredictionAccuracy } from './prediction-accuracy.js';
import { isFailed, runMetrics } from './run-metrics.js';

export const VERDICT_THRESHOLDS = { helps_at_or_below_pct: -5, hurts_at_or_above_pct: 5 } as const;

export type Verdict = 'HELPS' | 'wash' | 'HURTS';

export interface RunSide {
  requests: number;
  failed: number;
  instances_per_session: number;
  ttft_p90_s: number;
  ttft_mean_s: number;
  /** The router's predicted cached tokens against the engine's (prediction-accuracy.ts); null without predictions. */
  prediction: PredictionAccuracy | null;
}

export interface Comparison {
  a: RunSide;
  b: RunSide;
  matched: number;
  rerouted: number;
  reroute_pct: number;
  ttft_p90_change_pct: number | null;
  ttft_mean_change_pct: number | null;
  verdict: Verdict | null;
  thresholds: typeof VERDICT_THRESHOLDS;
}

/** Two record files that did not run the same trace. A data error (exit 1). */
export class RunMismatchError extends Error {
  readonly code = 'ERR_KVROUTE_RECORDS' as const;
}

const key = (r: RequestRecord): string => `${r.session}\u0000${r.turn}`;

function side(records: readonly RequestRecord[]): RunSide {
  const m = runMetrics(records);
  const ttft = Float64Array.from(
    records.filter((r) => !isFailed(r)),
    (r) => r.first_token - r.dispatch,
  ).sort();
  let sum = 0;
  for (const t of ttft) sum += t;
  return {
    requests: m.requests,
    failed: m.failed,
    instances_per_session: m.instances_per_session,
    ttft_p90_s: percentileOfSorted(ttft, 90),
    ttft_mean_s: ttft.length === 0 ? 0 : sum / ttft.length,
    prediction: predictionAccuracy(records),
  };
}

const change = (a: number, b: number): number | null => (a === 0 ? null : ((b - a) / a) * 100);

export function verdictOf(changePct: number | null): Verdict | null {
  if (changePct === null) return null;
  if (changePct <= VERDICT_THRESHOLDS.helps_at_or_below_pct) return 'HELPS';
  if (changePct >= VERDICT_THRESHOLDS.hurts_at_or_above_pct) return 'HURTS';
  return 'wash';
}

/** Refuses two runs of different traces, naming both files. */
export function checkSameTrace(pathA: string, a: RecordFile, pathB: string, b: RecordFile): void {
  if (a.header !== undefined && b.header !== undefined) {
    if (a.header.trace.fingerprint !== b.header.trace.fingerprint)
      throw new RunMismatchError(
        `${pathA} and ${pathB} ran different traces (${a.header.trace.path} ${a.header.trace.fingerprint} vs ${b.header.trace.path} ${b.header.trace.fingerprint}); compare needs two runs of one trace`,
      );
    return;
  }
  const keysA = new Set(a.records.map(key));
  const keysB = new Set(b.records.map(key));
  const onlyA = [...keysA].filter((k) => !keysB.has(k)).length;
  const onlyB = [...keysB].filter((k) => !keysA.has(k)).length;
  if (onlyA > 0 || onlyB > 0)
    throw new RunMismatchError(
      `${pathA} and ${pathB} hold different requests (${onlyA} (session, turn) only in the first, ${onlyB} only in the second; a file without a header is matched by its requests); compare needs two runs of one trace`,
    );
}

export function compareRuns(a: readonly RequestRecord[], b: readonly RequestRecord[]): Comparison {
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
  const p90Change = change(sa.ttft_p90_s, sb.ttft_p90_s);
  return {
    a: sa,
    b: sb,
    matched,
    rerouted,
    reroute_pct: matched === 0 ? 0 : (rerouted / matched) * 100,
    ttft_p90_change_pct: p90Change,
    ttft_mean_change_pct: change(sa.ttft_mean_s, sb.ttft_mean_s),
    verdict: verdictOf(p90Change),
    thresholds: VERDICT_THRESHOLDS,
  };
}
