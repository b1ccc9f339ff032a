/**
 * The tables of a sweep, as Markdown (tables.md, and what `kvroute sweep` prints):
 * - B3 (docs/glossary.md): per cell the latency percentiles, APC against the
 *   trace's intra-session ceiling, the interference and hotspot indices, slow requests and their
 *   causes when the summary has them, and instances per session;
 * - ES ablation (docs/glossary.md): per policy, shadow against shm
 *   (comparePairedRuns), with the verdict thresholds printed under the table;
 * - Offload (issue #18, docs/offload.md), when a cell runs an offload policy or offloaded: per
 *   cell TTFT p90, TPOT p99, the interference index, offloads and their mean TTFT and transfer;
 * - Flow control (docs/flow-control.md), when a cell's summary has `flow_metrics`: per cell
 *   Jain's index of tokens served over the tenants, the worst tenant's TTFT p90 and the refusals.
 */
import { refusedRequests, worstTenant, type FlowMetrics } from '../analysis/flow-metrics.js';
import type { TraceSummary } from '../analysis/trace-summary.js';
import { ES_COLUMNS, esRow, type EsPair } from '../report/es-ablation.js';
import type { CellSummary, SweepCell } from './sweep-layout.js';

export type { EsPair } from '../report/es-ablation.js';

const fixed = (value: number | null | undefined, digits: number): string =>
  value === null || value === undefined || !Number.isFinite(value) ? '-' : value.toFixed(digits);

const triple = (q: { p50: number; p90: number; p99: number }, digits: number): string =>
  `${fixed(q.p50, digits)} / ${fixed(q.p90, digits)} / ${fixed(q.p99, digits)}`;

function row(cells: readonly string[]): string {
  return `| ${cells.join(' | ')} |`;
}

function table(header: readonly string[], rows: readonly string[][]): string {
  return [row(header), row(header.map(() => '---')), ...rows.map(row)].join('\n');
}

/** n_slow and "cause n, …" from the run analysis' `slow` field, or "-" while summaries lack it. */
export function slowColumns(summary: CellSummary): [string, string] {
  const slow = summary.slow as { n_slow?: unknown; count?: unknown; causes?: unknown } | undefined;
  if (slow === undefined || slow === null || typeof slow !== 'object') return ['-', '-'];
  const count = typeof slow.n_slow === 'number' ? slow.n_slow : typeof slow.count === 'number' ? slow.count : null;
  const causes =
    slow.causes !== null && typeof slow.causes === 'object'
      ? Object.entries(slow.causes as Record<string, unknown>)
          .filter((entry): entry is [string, number] => typeof entry[1] === 'number')
          .map(([cause, n]) => `${cause.replaceAll('_', ' ')} ${n}`)
          .join(', ')
      : '';
  return [count === null ? '-' : String(count), causes === '' ? '-' : causes];
}

export function renderB3(
  cells: readonly SweepCell[],
  summaries: ReadonlyMap<string, CellSummary>,
  trace: TraceSummary,
): string {
  const ceiling = trace.apc_ceiling.intra_session.token_ratio;
  const rows = cells.map((cell) => {
    const s = summaries.get(cell.id)!;
    const [nSlow, causes] = slowColumns(s);
    return [
      cell.id,
      triple(s.ttft_s, 2),
      triple(s.tpot_ms, 1),
      triple(s.e2e_s, 2),
      `${fixed(s.apc * 100, 1)} % (${ceiling === 0 ? '-' : fixed((s.apc / ceiling) * 100, 0)} %)`,
      fixed(s.interference_index, 2),
      fixed(s.hotspot_index, 3),
      nSlow,
      causes,
      fixed(s.instances_per_session, 2),
    ];
  });
  const header = [
    'cell (policy-engine state)',
    'TTFT p50/p90/p99 (s)',
    'TPOT p50/p90/p99 (ms)',
    'E2E p50/p90/p99 (s)',
    'APC (% of ceiling)',
    'interference (×)',
    'hotspot (×)',
    'n_slow (requests)',
    'slow causes (requests)',
    'instances/session',
  ];
  return [
    `## B3: per cell`,
    '',
    table(header, rows),
    '',
    `APC ceiling (intra-session, token ratio): ${fixed(ceiling * 100, 1)} % of ${trace.requests} requests' input tokens. ` +
      `interference = TPOT p90 of decodes that overlapped a same-worker prefill ÷ TPOT p90 of clean ones; ` +
      `hotspot = max ÷ median over instances of TTFT p90.`,
  ].join('\n');
}

export function renderEs(pairs: readonly EsPair[]): string {
  if (pairs.length === 0) return '## ES ablation: shadow → shm\n\n(no policy ran on both shadow and shm)';
  const rows = pairs.map(esRow);
  const t = pairs[0]!.comparison.thresholds;
  return [
    '## ES ablation: shadow (es0) → shm (es1)',
    '',
    table(ES_COLUMNS, rows),
    '',
    `Requests matched by (session, turn); reroute = matched requests on another instance. Verdict on the TTFT p90 change: ` +
      `HELPS at ≤ −${Math.abs(t.helps_at_or_below_pct)} %, HURTS at ≥ +${t.hurts_at_or_above_pct} %, wash between.`,
  ].join('\n');
}

/** An offload policy's name: `<base>+offload`, or `v3` (docs/offload.md). */
const isOffloadPolicy = (policy: string): boolean => /(^|\+)offload$/.test(policy) || policy === 'v3';

/** The offload table, or undefined when no cell runs an offload policy and none offloaded. */
export function renderOffload(
  cells: readonly SweepCell[],
  summaries: ReadonlyMap<string, CellSummary>,
): string | undefined {
  const offloads = (s: CellSummary): number => (typeof s.offloads === 'number' ? s.offloads : 0);
  const seconds = (value: unknown, scale: number, digits: number): string =>
    typeof value === 'number' ? (value * scale).toFixed(digits) : '-';
  if (!cells.some((cell) => isOffloadPolicy(cell.policy) || offloads(summaries.get(cell.id)!) > 0)) return undefined;
  const rows = cells.map((cell) => {
    const s = summaries.get(cell.id)!;
    const n = offloads(s);
    return [
      cell.id,
      fixed(s.ttft_s.p90, 2),
      fixed(s.tpot_ms.p99, 1),
      fixed(s.interference_index, 2),
      `${n} (${s.requests === 0 ? '-' : fixed((n / s.requests) * 100, 1)} %)`,
      seconds(s.offloaded_ttft_mean_s, 1, 2),
      seconds(s.transfer_s_mean, 1000, 0),
    ];
  });
  const header = [
    'cell (policy-engine state)',
    'TTFT p90 (s)',
    'TPOT p99 (ms)',
    'interference (×)',
    'offloads (requests, % of all)',
    'offloaded TTFT mean (s)',
    'transfer mean (ms)',
  ];
  return [
    '## Offload',
    '',
    table(header, rows),
    '',
    'offloads = requests whose prefill ran on another instance than their decode; their TTFT runs from dispatch to the ' +
      "decode instance's first token (prefill, KV transfer, first decode step).",
  ].join('\n');
}

/** The flow control table, or undefined when no cell ran with flow control. */
export function renderFlow(
  cells: readonly SweepCell[],
  summaries: ReadonlyMap<string, CellSummary>,
): string | undefined {
  const flowOf = (cell: SweepCell) => summaries.get(cell.id)!.flow_metrics as FlowMetrics | undefined;
  if (!cells.some((cell) => flowOf(cell) !== undefined)) return undefined;
  const rows = cells.map((cell) => {
    const flow = flowOf(cell);
    if (flow === undefined) return [cell.id, '-', '-', '-', '-'];
    const worst = worstTenant(flow);
    const refused = refusedRequests(flow);
    const requests = summaries.get(cell.id)!.requests;
    return [
      cell.id,
      String(flow.tenants.length),
      fixed(flow.jain_tokens, 3),
      worst === undefined ? '-' : `${fixed(worst.ttft_p90_s, 2)} (${worst.name})`,
      `${refused} (${requests === 0 ? '-' : fixed((refused / requests) * 100, 1)} %)`,
    ];
  });
  const header = [
    'cell (policy-engine state)',
    'tenants',
    "Jain's index (tokens)",
    'worst tenant TTFT p90 (s)',
    'refused (requests, % of all)',
  ];
  return [
    '## Flow control',
    '',
    table(header, rows),
    '',
    "Jain's index of the tokens each tenant was served (input + output of its answered requests): (Σx)² ÷ (n·Σx²), " +
      '1 when all tenants got the same, 1/n when one got everything; it means fair only among equally weighted, ' +
      'backlogged tenants. TTFT runs from arrival at the router, so it counts the wait for a slot; the worst tenant ' +
      'is the one with the highest TTFT p90 among those with an answered request. refused = 429s of flow control ' +
      '(deadline, rate limit).',
  ].join('\n');
}

/** `perturbed`, when given, names the engine-model perturbation the cells ran under, in a line above the tables. */
export function renderTables(
  cells: readonly SweepCell[],
  summaries: ReadonlyMap<string, CellSummary>,
  trace: TraceSummary,
  pairs: readonly EsPair[],
  perturbed?: string,
): string {
  const head = perturbed === undefined ? '' : `Engine model perturbed: ${perturbed}.\n\n`;
  const extra = [renderOffload(cells, summaries), renderFlow(cells, summaries)].filter((t) => t !== undefined);
  return `${head}${renderB3(cells, summaries, trace)}\n\n${renderEs(pairs)}\n${extra.map((t) => `\n${t}\n`).join('')}`;
}
