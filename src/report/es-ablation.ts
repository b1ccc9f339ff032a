/**
 * The report's ES ablation (engine-state ablation: each policy with only its shadow counters,
 * es0, against the same policy also reading the engines' real state, es1), the table `kvroute
 * sweep` writes to tables.md, computed from the same data the same way: for each policy with a
 * shadow and an shm cell that both name their records, `comparePairedRuns` (cmp_es of the ES ablation, docs/glossary.md)
 * over the two record files. Its verdict, HELPS / wash / HURTS, is on the TTFT p90 change.
 *
 * Rendered here as HTML (verdicts as coloured badges) and Markdown, with the thresholds stated.
 * Cost: reads both record files of each pair, O(records).
 */
import { comparePairedRuns, type PairedComparison } from '../analysis/paired-compare.js';
import { VERDICT_THRESHOLDS } from '../analysis/compare-runs.js';
import { readRecordFile } from '../trace/record-file.js';

export interface EsPair {
  policy: string;
  comparison: PairedComparison;
}

/** A cell as far as the ablation cares: its policy, engine state and records path. */
export interface EsCell {
  policy: string;
  engine_state?: string;
  records?: string;
}

/** For each policy with both a shadow and an shm cell with records: shadow → shm. */
export function esAblation(cells: readonly EsCell[]): EsPair[] {
  const pairs: EsPair[] = [];
  for (const shadow of cells) {
    if (shadow.engine_state !== 'shadow' || shadow.records === undefined) continue;
    const shm = cells.find((c) => c.policy === shadow.policy && c.engine_state === 'shm' && c.records !== undefined);
    if (shm === undefined) continue;
    const comparison = comparePairedRuns(readRecordFile(shadow.records).records, readRecordFile(shm.records!).records);
    pairs.push({ policy: shadow.policy, comparison });
  }
  return pairs;
}

const fixed = (value: number | null | undefined, digits: number): string =>
  value === null || value === undefined || !Number.isFinite(value) ? '-' : value.toFixed(digits);

const signedPct = (value: number | null): string =>
  value === null ? '-' : `${value > 0 ? '+' : value < 0 ? '−' : '±'}${Math.abs(value).toFixed(1)} %`;

export const ES_COLUMNS = [
  'policy',
  'instances/session',
  'reroute (% of requests)',
  'TTFT p90 (s)',
  'TTFT mean (s)',
  'verdict',
];

/** One row's cells, as text, in ES_COLUMNS order. */
export function esRow({ policy, comparison: c }: EsPair): string[] {
  return [
    policy,
    `${fixed(c.instances_per_session_a, 2)} → ${fixed(c.instances_per_session_b, 2)}`,
    `${fixed(c.reroute_pct, 1)} %`,
    `${fixed(c.ttft_p90_a, 2)} → ${fixed(c.ttft_p90_b, 2)} (${signedPct(c.ttft_p90_change_pct)})`,
    `${fixed(c.ttft_mean_a, 2)} → ${fixed(c.ttft_mean_b, 2)} (${signedPct(c.ttft_mean_change_pct)})`,
    c.verdict ?? '-',
  ];
}

/** What the table measures and where the verdict's lines are. */
export function esNote(): string {
  const t = VERDICT_THRESHOLDS;
  return (
    'Each policy with shadow counters only (es0) against the same policy also reading the engines’ real state ' +
    '(es1, shm). Requests matched by (session, turn); reroute = matched requests on another instance. ' +
    `Verdict on the TTFT p90 change: HELPS at ≤ −${Math.abs(t.helps_at_or_below_pct)} %, ` +
    `HURTS at ≥ +${t.hurts_at_or_above_pct} %, wash between.`
  );
}
