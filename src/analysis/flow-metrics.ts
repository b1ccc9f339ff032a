/**
 * Flow control's figures of a run (docs/flow-control.md), from records that carry `tenant` and
 * `priority` (the simulator with flow control, a live proxy's access log):
 * - per tenant and per class: requests, refused (by flow control or otherwise failed), TTFT p90
 *   from arrival at the router (so it counts the wait for a slot), and the p90 of that wait;
 * - per tenant, the tokens it was served (input + output of its answered requests), and Jain's
 *   fairness index of those over the tenants: (Σx)² ÷ (n·Σx²), 1 when all are equal, 1/n when
 *   one tenant took everything. It means "fair" only among tenants that were backlogged with
 *   equal weights; the caller picks which tenants to compare.
 */
import type { RequestRecord } from '../trace/records.js';
import { percentileOfSorted } from './percentiles.js';
import { isFailed } from './run-metrics.js';

export interface FlowGroupMetrics {
  name: string;
  requests: number;
  refused: number;
  ttft_p90_s: number;
  queued_p90_s: number;
  /** Input + output tokens of its answered requests. */
  tokens: number;
}

export interface FlowMetrics {
  tenants: FlowGroupMetrics[];
  classes: FlowGroupMetrics[];
  /** Jain's index of `tokens` over every tenant. */
  jain_tokens: number;
}

const p90 = (values: number[]): number =>
  values.length === 0 ? 0 : percentileOfSorted(new Float64Array(values).sort(), 90);

/** Jain's fairness index of `values` (1 for none or all equal). */
export function jainIndex(values: readonly number[]): number {
  const sum = values.reduce((a, b) => a + b, 0);
  const squares = values.reduce((a, b) => a + b * b, 0);
  return values.length === 0 || squares === 0 ? 1 : (sum * sum) / (values.length * squares);
}

/** undefined when no record carries a tenant (a run without flow control). */
export function flowMetrics(records: readonly RequestRecord[]): FlowMetrics | undefined {
  if (!records.some((r) => r.tenant !== undefined)) return undefined;
  const tenants = group(records, (r) => r.tenant ?? '');
  return {
    tenants,
    classes: group(records, (r) => r.priority ?? ''),
    jain_tokens: jainIndex(tenants.map((t) => t.tokens)),
  };
}

/**
 * The tenant with the highest TTFT p90 among those with at least one answered request (ties: the
 * first by name); undefined when none was answered. Hazard: a tenant whose every request was
 * refused has no TTFT and is passed over, so read this beside `refused`: a setting that refuses a
 * tenant outright must not look better for it.
 */
export function worstTenant(flow: FlowMetrics): FlowGroupMetrics | undefined {
  let worst: FlowGroupMetrics | undefined;
  for (const t of flow.tenants)
    if (t.requests > t.refused && (worst === undefined || t.ttft_p90_s > worst.ttft_p90_s)) worst = t;
  return worst;
}

/** Requests refused over every tenant (flow control's 429s, and any other failure). */
export const refusedRequests = (flow: FlowMetrics): number => flow.tenants.reduce((n, t) => n + t.refused, 0);

function group(records: readonly RequestRecord[], key: (r: RequestRecord) => string): FlowGroupMetrics[] {
  const groups = new Map<
    string,
    { requests: number; refused: number; ttft: number[]; queued: number[]; tokens: number }
  >();
  for (const r of records) {
    const name = key(r);
    let g = groups.get(name);
    if (g === undefined) groups.set(name, (g = { requests: 0, refused: 0, ttft: [], queued: [], tokens: 0 }));
    g.requests++;
    g.queued.push(r.queued_s ?? 0);
    if (isFailed(r)) {
      g.refused++;
      continue;
    }
    g.ttft.push(r.first_token - r.dispatch);
    g.tokens += r.input_tokens + r.output_tokens;
  }
  return [...groups]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, g]) => ({
      name,
      requests: g.requests,
      refused: g.refused,
      ttft_p90_s: p90(g.ttft),
      queued_p90_s: p90(g.queued),
      tokens: g.tokens,
    }));
}
