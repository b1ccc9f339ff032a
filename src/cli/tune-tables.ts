/**
 * The text report of `kvroute tune` (--json prints the TuneResult itself): what was searched and
 * how, a Markdown table of every point (best first), the best setting as a policy spec, its
 * margins, and the holdout traces apart.
 */
import { basename } from 'node:path';

import { formatTotal } from '../analysis/format-units.js';
import { formatPolicyArg } from '../core/policy-arg.js';
import { counted } from './counted.js';
import type { Margin, TuneResult } from './tune-result.js';

function row(cells: readonly string[]): string {
  return `| ${cells.join(' | ')} |`;
}

function table(header: readonly string[], rows: readonly string[][]): string {
  return [row(header), row(header.map(() => '---')), ...rows.map(row)].join('\n');
}

/** A parameter value as given: up to 4 decimals, trailing zeros dropped. */
export function paramText(value: number): string {
  return String(Number(value.toFixed(4)));
}

/** Column names for traces: their base names when those differ, else t1, t2, …. */
function traceNames(paths: readonly string[]): string[] {
  const names = paths.map((path) => basename(path));
  return new Set(names).size === names.length ? names : paths.map((_, i) => `t${i + 1}`);
}

/** "t1 = a/s.jsonl (1,255 requests); …", the path left out where it is the column's name. */
function legend(names: readonly string[], traces: TuneResult['traces']): string {
  return traces
    .map((t, i) => `${names[i] === t.path ? '' : `${names[i]} = `}${t.path} (${formatTotal(t.requests, 'requests')})`)
    .join('; ');
}

export function renderTune(r: TuneResult): string {
  const unit = r.objective.unit;
  const digits = unit === 's' ? 3 : 2;
  const value = (v: number): string => v.toFixed(digits);
  const names = r.params.map((p) => p.name);
  const traces = traceNames(r.traces.map((t) => t.path));
  const metric = `${r.objective.name} (${unit})`;
  const over = r.objective.aggregate === 'worst' ? 'worst' : 'mean';
  const ranked = [...r.points].sort((a, b) => a.objective - b.objective || a.id - b.id);
  const rows = ranked.map((p) => [
    p.id === r.best.id ? `**${p.id}**` : String(p.id),
    String(p.round),
    ...names.map((n) => paramText(p.params[n]!)),
    ...p.per_trace.map(value),
    value(p.objective),
  ]);
  rows.push([
    'defaults',
    '-',
    ...names.map((n) => paramText(r.defaults.params[n]!)),
    ...r.defaults.per_trace.map(value),
    value(r.defaults.objective),
  ]);
  const setting = (params: Record<string, number>): string =>
    names.map((n) => `${n} ${paramText(params[n]!)}`).join(', ');
  const lines = [
    `# kvroute tune: ${r.policy}, ${metric}, ${over} over ${counted(r.traces.length, 'trace')}`,
    '',
    `${counted(r.setup.instances, 'instance')}${r.setup.fleet === undefined ? '' : ` (fleet ${r.setup.fleet})`}, engine state ${r.setup.engine_state}, preset ${r.setup.preset}${flowText(r.setup.flow)}; ${r.search.simulations} simulations.`,
    `Search: ${r.search.method}.`,
    `Traces: ${legend(traces, r.traces)}.`,
    '',
    `## Points, best first (${metric})`,
    '',
    table(['#', 'round', ...names, ...traces, over], rows),
    '',
    '## Best',
    '',
    `#${r.best.id}: ${setting(r.best.params)}: ${r.objective.name} ${value(r.best.objective)} ${unit} (${over}).`,
    `As a policy spec (new Router({ policy }), POST /admin/policy): ${JSON.stringify(r.best.spec)}`,
    `As a flag (kvroute serve --policy, sim run --policy, sweep --policies): ${formatPolicyArg(r.best.spec)}`,
    '',
    '## Margins',
    '',
    `- against the defaults (${setting(r.defaults.params)}): ${marginText(r.margins.vs_defaults, value, unit)}`,
    r.margins.vs_runner_up === null
      ? '- against the runner-up: none (one point)'
      : `- against the runner-up #${r.margins.vs_runner_up.id}: ${marginText(r.margins.vs_runner_up, value, unit)}`,
    `- within ${r.margins.within * 100} % of the best (${r.objective.name} ≤ ${value(r.best.objective * (1 + r.margins.within))} ${unit}): ${r.margins.intervals[0]?.points ?? 0} of ${r.points.length} evaluated points; each parameter's values among them:`,
    ...r.margins.intervals.map((i) => `  - ${i.name}: ${paramText(i.lo)} .. ${paramText(i.hi)}`),
  ];
  if (r.holdout !== null) lines.push('', ...renderHoldout(r, value, unit, metric));
  return lines.join('\n');
}

/** ", flow control: max in flight 16, --flow f.yaml, queue timeout 5000 ms"; nothing without. */
function flowText(flow: TuneResult['setup']['flow']): string {
  if (flow === undefined) return '';
  const file = flow.file === undefined ? '' : `, --flow ${flow.file}`;
  const timeout = flow.queue_timeout_ms === undefined ? '' : `, queue timeout ${flow.queue_timeout_ms} ms`;
  return `, flow control: max in flight ${flow.max_in_flight}${file}${timeout}`;
}

/** "9.863 → 8.213 s: 1.650 s (16.7 %) better" or "… worse". */
function marginText(m: Margin, value: (v: number) => string, unit: string): string {
  const pct = m.relative === null ? '' : ` (${(Math.abs(m.relative) * 100).toFixed(1)} %)`;
  const verdict = m.delta > 0 ? 'better' : m.delta < 0 ? 'worse' : 'equal';
  return `${value(m.objective)} → ${value(m.objective - m.delta)} ${unit}: the best is ${value(Math.abs(m.delta))} ${unit}${pct} ${verdict}`;
}

/** "+7.6 %", "−12.0 %", "±0.0 %". */
function signedPercent(fraction: number): string {
  const text = Math.abs(fraction * 100).toFixed(1);
  const sign = Number(text) === 0 ? '±' : fraction > 0 ? '+' : '−';
  return `${sign}${text} %`;
}

function renderHoldout(r: TuneResult, value: (v: number) => string, unit: string, metric: string): string[] {
  const h = r.holdout!;
  const names = traceNames(h.traces.map((t) => t.path));
  const change = (defaults: number, best: number): string =>
    defaults === 0 ? '-' : signedPercent((best - defaults) / defaults);
  const rows = h.traces.map((_t, i) => [
    names[i]!,
    value(h.defaults.per_trace[i]!),
    value(h.best.per_trace[i]!),
    change(h.defaults.per_trace[i]!, h.best.per_trace[i]!),
  ]);
  const over = r.objective.aggregate === 'worst' ? 'worst' : 'mean';
  rows.push([
    over,
    value(h.defaults.objective),
    value(h.best.objective),
    change(h.defaults.objective, h.best.objective),
  ]);
  return [
    `## Holdout (never used to choose): ${metric}`,
    '',
    `Traces: ${legend(names, h.traces)}.`,
    '',
    table(['trace', 'defaults', `best #${r.best.id}`, 'change'], rows),
    '',
    `On the holdout: ${marginText(h.vs_defaults, value, unit)}.`,
  ];
}
