/**
 * The human tables of `kvroute analyze run` and `kvroute analyze compare`; every row or column
 * names its unit. The --json forms print the analysis objects themselves and never come here.
 */
import type { Comparison, RunSide } from '../analysis/compare-runs.js';
import type { PredictionAccuracy } from '../analysis/prediction-accuracy.js';
import { durationScale, formatCount, formatDuration, formatIn, formatTotal } from '../analysis/format-units.js';
import type { Quantiles } from '../analysis/run-metrics.js';
import type { RunAnalysis } from '../analysis/run-analysis.js';
import { SLOW_CAUSES } from '../analysis/slow-causes.js';
import type { RunHeader } from '../trace/records.js';
import { counted } from './counted.js';
import { index, latencyRow } from './sim-tables.js';

const pct = (part: number, whole: number): string => (whole === 0 ? '-' : `${((part / whole) * 100).toFixed(0)}%`);

function title(header: RunHeader | undefined, a: RunAnalysis): string {
  const what =
    header === undefined
      ? 'records without a header'
      : [
          header.source,
          header.policy,
          header.instances === undefined ? undefined : counted(header.instances, 'instance'),
        ]
          .filter((part) => part !== undefined)
          .join(' · ');
  return `${what} · ${formatTotal(a.requests, 'requests')} (${formatTotal(a.failed)} failed) · ${formatDuration(a.makespan_s)} span`;
}

export function renderRun(header: RunHeader | undefined, a: RunAnalysis): string {
  const ms = (q: Quantiles): Quantiles => ({ p50: q.p50 / 1000, p90: q.p90 / 1000, p99: q.p99 / 1000 });
  const workerScale = durationScale(a.per_instance.map((i) => i.ttft_p90_s));
  const { slow } = a;
  return [
    title(header, a),
    `${''.padEnd(14)}${['p50', 'p90', 'p99'].map((p) => p.padStart(9)).join('')}`,
    latencyRow('TTFT', a.ttft_s),
    latencyRow('TPOT', ms(a.tpot_ms)),
    latencyRow('E2E', a.e2e_s),
    `APC ${(a.apc * 100).toFixed(1)}% · interference ${index(a.interference_index)} · hotspot ${index(a.hotspot_index)} · instances per session ${a.instances_per_session.toFixed(2)} · preempted requests ${formatTotal(a.preempted_requests)}`,
    '',
    `${'instance'.padEnd(10)}${'requests'.padStart(10)}${`TTFT p90 (${workerScale.unit})`.padStart(16)}`,
    ...a.per_instance.map(
      (i) =>
        `${String(i.instance).padEnd(10)}${formatTotal(i.requests).padStart(10)}${formatIn(i.ttft_p90_s, workerScale, 2).padStart(16)}`,
    ),
    '',
    `slow requests (TTFT > ${formatDuration(slow.slo.ttft_s)} or TPOT > ${slow.slo.tpot_ms} ms): ${formatTotal(slow.n_slow)} of ${formatTotal(a.requests - a.failed)} (${pct(slow.n_slow, a.requests - a.failed)})`,
    `${'cause'.padEnd(26)}${'requests'.padStart(10)}${'share'.padStart(8)}`,
    ...SLOW_CAUSES.map(
      (c) =>
        `${c.replaceAll('_', ' ').padEnd(26)}${formatTotal(slow.causes[c]).padStart(10)}${pct(slow.causes[c], slow.n_slow).padStart(8)}`,
    ),
    ...predictionRows(a.prediction),
    ...reuseRows(a),
  ].join('\n');
}

const share = (fraction: number): string => `${(fraction * 100).toFixed(1)}%`;

/** The prediction section (docs/analysis.md#prediction); nothing when no record has a prediction. */
function predictionRows(p: PredictionAccuracy | null): string[] {
  if (p === null) return [];
  const without = p.without_prediction === 0 ? '' : ` (${formatTotal(p.without_prediction)} without one)`;
  const split = (name: string, s: PredictionAccuracy['over']): string =>
    `${name.padEnd(28)}${formatTotal(s.requests).padStart(10)}${pct(s.requests, p.requests).padStart(8)}${formatCount(s.tokens).padStart(10)}`;
  return [
    '',
    `cached tokens predicted by the router: ${formatTotal(p.requests)} requests with a prediction${without}`,
    `exact ${share(p.exact_fraction)} · mean absolute error ${p.mae_tokens.toFixed(1)} tokens`,
    `${'prediction'.padEnd(28)}${'requests'.padStart(10)}${'share'.padStart(8)}${'tokens'.padStart(10)}`,
    `${'exact'.padEnd(28)}${formatTotal(p.exact).padStart(10)}${pct(p.exact, p.requests).padStart(8)}${'-'.padStart(10)}`,
    split('over (expected, not there)', p.over),
    split('under (there, not expected)', p.under),
    `APC predicted ${share(p.predicted_apc)} − lost to over-prediction ${share(p.lost_apc)} + unpredicted ${share(p.unpredicted_apc)} = actual ${share(p.actual_apc)}`,
  ];
}

function reuseRows(a: RunAnalysis): string[] {
  if (a.reuse === null) return [];
  const { tokens, fractions } = a.reuse;
  const classes = ['intra_session', 'cross_session', 'shared_prefix', 'unclassified'] as const;
  return [
    '',
    `cached tokens by reuse (shared prefix: ≥ ${a.reuse.shared_prefix_min_sessions} sessions)`,
    `${'class'.padEnd(26)}${'tokens'.padStart(10)}${'share'.padStart(8)}`,
    ...classes.map(
      (c) =>
        `${c.replace('_', '-').padEnd(26)}${formatCount(tokens[c]).padStart(10)}${`${(fractions[c] * 100).toFixed(1)}%`.padStart(8)}`,
    ),
  ];
}

const signed = (value: number | null): string =>
  value === null ? '-' : `${value > 0 ? '+' : value < 0 ? '−' : ''}${Math.abs(value).toFixed(1)}%`;

/** Prediction rows of a comparison, when either run carries predictions. */
const PREDICTION_ROWS: ReadonlyArray<[string, (p: PredictionAccuracy) => string]> = [
  ['predicted exactly', (p) => share(p.exact_fraction)],
  ['prediction MAE (tokens)', (p) => p.mae_tokens.toFixed(1)],
  ['APC lost to over-prediction', (p) => share(p.lost_apc)],
  ['APC cached, unpredicted', (p) => share(p.unpredicted_apc)],
];

function predictionComparison(c: Comparison, row: (name: string, pick: (s: RunSide) => string) => string): string[] {
  if (c.a.prediction === null && c.b.prediction === null) return [];
  return PREDICTION_ROWS.map(([name, pick]) => row(name, (s) => (s.prediction === null ? '-' : pick(s.prediction))));
}

export function renderComparison(pathA: string, pathB: string, c: Comparison): string {
  const scale = durationScale([c.a.ttft_p90_s, c.b.ttft_p90_s, c.a.ttft_mean_s, c.b.ttft_mean_s]);
  const row = (name: string, pick: (s: RunSide) => string, delta = ''): string =>
    `${name.padEnd(28)}${pick(c.a).padStart(12)}${pick(c.b).padStart(12)}${delta.padStart(10)}`;
  return [
    `A ${pathA}`,
    `B ${pathB}`,
    `${''.padEnd(28)}${'A'.padStart(12)}${'B'.padStart(12)}${'A → B'.padStart(10)}`,
    row('requests', (s) => formatTotal(s.requests)),
    row('failed', (s) => formatTotal(s.failed)),
    row('instances per session', (s) => s.instances_per_session.toFixed(2)),
    row(`TTFT p90 (${scale.unit})`, (s) => formatIn(s.ttft_p90_s, scale, 2), signed(c.ttft_p90_change_pct)),
    row(`TTFT mean (${scale.unit})`, (s) => formatIn(s.ttft_mean_s, scale, 2), signed(c.ttft_mean_change_pct)),
    ...predictionComparison(c, row),
    '',
    `rerouted ${formatTotal(c.rerouted)} of ${formatTotal(c.matched)} matched requests (${c.reroute_pct.toFixed(1)}%)`,
    `verdict ${c.verdict ?? '-'} (TTFT p90 change: HELPS ≤ ${c.thresholds.helps_at_or_below_pct}%, HURTS ≥ +${c.thresholds.hurts_at_or_above_pct}%, wash between)`,
  ]
    .map((line) => line.trimEnd())
    .join('\n');
}
