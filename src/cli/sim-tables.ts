/**
 * The human tables of `kvroute sim run` and `kvroute sim interference`. Each row or column names
 * its unit; latency rows take the unit that fits their largest value (format-units.ts). The
 * --json forms print the metrics objects themselves and never come here.
 */
import { durationScale, formatDuration, formatIn, formatTotal } from '../analysis/format-units.js';
import type { OffloadMetrics } from '../analysis/offload-metrics.js';
import type { FlowMetrics } from '../analysis/flow-metrics.js';
import type { Quantiles, RunMetrics } from '../analysis/run-metrics.js';
import { formatPolicyArg } from '../core/policy-arg.js';
import { describeScaling, isUnscaled } from '../sim/engine-preset.js';
import { formatFleet, isUniformFleet } from '../sim/fleet-spec.js';
import type { InterferenceCell } from '../sim/interference-bench.js';
import { counted } from './counted.js';
import type { SimulationOptions } from '../sim/simulator.js';

export const index = (value: number | null | undefined): string =>
  value === null || value === undefined ? '-' : value.toFixed(2);

/** A latency row (values in seconds) in its own unit: "  TTFT (s)   0.88   7.72  15.75". */
export function latencyRow(name: string, q: Quantiles): string {
  const values = [q.p50, q.p90, q.p99];
  const scale = durationScale(values);
  const decimals = ['s', 'min', 'h'].includes(scale.unit) ? 2 : 1;
  return `  ${`${name} (${scale.unit})`.padEnd(12)}${values.map((v) => formatIn(v, scale, decimals).padStart(9)).join('')}`;
}

/** `offload`, when some request was offloaded, adds a line of the offload figures. */
export function renderMetrics(
  options: SimulationOptions,
  m: RunMetrics,
  makespan: number,
  offload?: OffloadMetrics,
): string {
  const policy = formatPolicyArg(options.policy);
  const ms = (q: Quantiles): Quantiles => ({ p50: q.p50 / 1000, p90: q.p90 / 1000, p99: q.p99 / 1000 });
  const scaled = isUnscaled(options.scaling) ? '' : ` · ${describeScaling(options.scaling)}`;
  const replicas = (options.replicas ?? 1) > 1 ? ` · ${options.replicas} replicas (${options.replicaAssign})` : '';
  const delay = options.syncDelayMs ? ` after ${options.syncDelayMs} ms` : '';
  const cache = options.cacheState === 'events' ? ` · cache state from KV events${delay}` : '';
  const load = options.syncLoad === true ? ` · peers' load and sessions shared${delay}` : '';
  const fleet =
    options.fleet === undefined || isUniformFleet(options.fleet) ? '' : ` (fleet ${formatFleet(options.fleet)})`;
  return [
    `${policy} · ${counted(options.instances ?? 0, 'instance')}${fleet}${replicas} · engine state ${options.engineState}${cache}${load}${scaled} · ${formatTotal(m.requests, 'requests')} · ${formatDuration(makespan)} simulated`,
    `${''.padEnd(14)}${['p50', 'p90', 'p99'].map((p) => p.padStart(9)).join('')}`,
    latencyRow('TTFT', m.ttft_s),
    latencyRow('TPOT', ms(m.tpot_ms)),
    latencyRow('E2E', m.e2e_s),
    `APC ${(m.apc * 100).toFixed(1)}% · interference ${index(m.interference_index)} · hotspot ${index(m.hotspot_index)} · instances per session ${m.instances_per_session.toFixed(2)} · preempted requests ${formatTotal(m.preempted_requests)}`,
    ...(offload === undefined || offload.offloads === 0
      ? []
      : [
          `offloaded prefills ${formatTotal(offload.offloads)} · their TTFT mean ${formatDuration(offload.offloaded_ttft_mean_s!)} · transfer mean ${formatDuration(offload.transfer_s_mean!)} · ${formatTotal(offload.transferred_tokens, 'tokens')} moved`,
        ]),
  ].join('\n');
}

/** The B2 cells: a header, a row of units, then one row per cell. */
export function renderInterference(cells: readonly InterferenceCell[]): string {
  const row = (values: string[]): string =>
    `${values[0]!.padEnd(10)}${values
      .slice(1)
      .map((v) => v.padStart(10))
      .join('')}`;
  return [
    row(['variant', 'prefill', 'overlap', 'clean', 'TPOT idx', 'TTFT idx']),
    row(['', 'tokens', 'requests', 'requests', 'ratio', 'ratio']),
    ...cells.map((c) =>
      row([
        c.variant,
        String(c.prefill_tokens),
        String(c.n_overlap),
        String(c.n_clean),
        index(c.tpot_index),
        index(c.ttft_index),
      ]),
    ),
  ].join('\n');
}

/** Flow control's table: per tenant, then per class; TTFT from arrival at the router. */
export function renderFlowMetrics(flow: FlowMetrics): string[] {
  const header = ['', 'requests', 'refused', 'TTFT p90', 'queued p90', 'tokens'];
  const rows = (groups: FlowMetrics['tenants'], label: string) =>
    groups.map((g) => [
      `${label} ${g.name}`,
      String(g.requests),
      String(g.refused),
      formatDuration(g.ttft_p90_s),
      formatDuration(g.queued_p90_s),
      g.tokens.toLocaleString('en-US'),
    ]);
  const table = [header, ...rows(flow.tenants, 'tenant'), ...rows(flow.classes, 'class')];
  const widths = header.map((_, column) => Math.max(...table.map((row) => row[column]!.length)));
  return [
    'flow control (TTFT from arrival at the router, so it counts the wait for a slot):',
    ...table.map(
      (row) =>
        `  ${row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ')}`,
    ),
    `  Jain's fairness index of tokens served over the tenants: ${flow.jain_tokens.toFixed(3)}`,
  ];
}
