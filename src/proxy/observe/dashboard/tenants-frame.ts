/**
 * The tenants panel's part of a dashboard frame (docs/flow-control.md "Metrics and logs"): per
 * tenant and priority class, requests waiting now, the queue wait p90 and decisions by outcome
 * over the window, tokens per minute, and what a rate-limited tenant's buckets hold.
 *
 * Where each number comes from:
 * - waiting, limits: flow control now, the whole process (FlowNow: the main thread live, the
 *   other threads' last reports, thread-flow.ts);
 * - decisions, wait p90, tokens: the DashboardObserver's TenantWindows (onFlow, onFlowOutput;
 *   other threads' calls arrive through the observer relay).
 *
 * Bound: the rows are the `top` tenants by traffic (decisions in the window plus requests
 * waiting; ties by name), one row per class they have; every other tenant, and the windows'
 * own `other` past MAX_TENANTS, is summed into one `other` row per class (its p90 from the
 * merged bins), so a frame has at most (top + 1) × classes rows whatever the number of tenants.
 */
import type { FlowNow, TenantLimitsNow } from '../../threads/thread-flow.js';
import { addTotals, emptyTotals, OTHER, waitQuantile, type TenantWindows, type WindowTotals } from './tenant-window.js';

/** Tenants shown by name by default; the rest are folded into `other`. */
export const TOP_TENANTS = 10;

export interface TenantRow {
  tenant: string;
  priority: string;
  /** A sum of the tenants beyond the top ones (`tenant` is then "other"). */
  other: boolean;
  /** Requests waiting for a slot now. */
  waiting: number;
  /** Queue wait p90 (ms) of the requests decided in the window (0: a slot was free); null with none. */
  waitP90Ms: number | null;
  /** Decisions in the window by outcome: every name of TenantsFrame.outcomes, 0 when none. */
  outcomes: Record<string, number>;
  /** Input tokens let in, and output tokens streamed, per minute over the window. */
  inputTokensPerMinute: number;
  outputTokensPerMinute: number;
  /** The tenant's rate limits (whole process) and what its buckets hold now; null: none (and for `other`). */
  limits: TenantLimitsNow | null;
}

export interface TenantsFrame {
  /** Flow control can hold or refuse a request: --max-in-flight is set, or a tenant has rpm/tpm. */
  enabled: boolean;
  /** Seconds the counts, p90 and token rates are over. */
  windowSeconds: number;
  /** The outcome columns, in order: admitted, the known refusal causes, then any other seen. */
  outcomes: string[];
  /** Named tenants first by traffic, then the `other` rows; within a tenant, classes by priority. */
  rows: TenantRow[];
  /** Tenants with traffic in the window or requests waiting, and how many were folded into `other`. */
  tenants: number;
  folded: number;
}

interface Cell {
  totals: WindowTotals;
  waiting: number;
}

/** The tenants panel now; `flow` undefined (a source without flow control) shows the windows alone. */
export function buildTenantsFrame(
  windows: TenantWindows,
  flow: FlowNow | undefined,
  nowMs: number,
  top = TOP_TENANTS,
): TenantsFrame {
  const byTenant = new Map<string, Map<string, Cell>>();
  const cell = (tenant: string, priority: string): Cell => {
    let classes = byTenant.get(tenant);
    if (classes === undefined) byTenant.set(tenant, (classes = new Map()));
    let c = classes.get(priority);
    if (c === undefined) classes.set(priority, (c = { totals: emptyTotals(), waiting: 0 }));
    return c;
  };
  for (const { tenant, priority, totals } of windows.totals(nowMs)) addTotals(cell(tenant, priority).totals, totals);
  for (const [tenant, priority, waiting] of flow?.waiting ?? []) cell(tenant, priority).waiting += waiting;

  const traffic = new Map<string, number>();
  for (const [tenant, classes] of byTenant) {
    let n = 0;
    for (const c of classes.values()) n += c.waiting + c.totals.counts.reduce((a, b) => a + b, 0);
    traffic.set(tenant, n);
  }
  // `other` (the windows' overflow) is never a top tenant: it always folds.
  const ranked = [...byTenant.keys()]
    .filter((t) => t !== OTHER)
    .sort((a, b) => traffic.get(b)! - traffic.get(a)! || (a < b ? -1 : a > b ? 1 : 0));
  const shown = ranked.slice(0, Math.max(0, top));
  const folded = new Map<string, Cell>();
  let foldedTenants = 0;
  for (const [tenant, classes] of byTenant) {
    if (shown.includes(tenant)) continue;
    if (tenant !== OTHER) foldedTenants++;
    for (const [priority, c] of classes) {
      let f = folded.get(priority);
      if (f === undefined) folded.set(priority, (f = { totals: emptyTotals(), waiting: 0 }));
      addTotals(f.totals, c.totals);
      f.waiting += c.waiting;
    }
  }

  const classOrder = (flow?.classes ?? []) as readonly string[];
  const byClass = (a: string, b: string): number => {
    const ra = classOrder.indexOf(a);
    const rb = classOrder.indexOf(b);
    if (ra !== rb) return (ra < 0 ? Infinity : ra) - (rb < 0 ? Infinity : rb);
    return a < b ? -1 : a > b ? 1 : 0;
  };
  const perMinute = 60 / windows.seconds;
  const row = (tenant: string, priority: string, c: Cell, other: boolean): TenantRow => {
    const outcomes: Record<string, number> = {};
    windows.outcomes.forEach((name, i) => (outcomes[name] = c.totals.counts[i]!));
    return {
      tenant,
      priority,
      other,
      waiting: c.waiting,
      waitP90Ms: waitQuantile(c.totals, 0.9),
      outcomes,
      inputTokensPerMinute: c.totals.inputTokens * perMinute,
      outputTokensPerMinute: c.totals.outputTokens * perMinute,
      limits: other ? null : (flow?.limits(tenant) ?? null),
    };
  };
  const rows: TenantRow[] = [];
  for (const tenant of shown) {
    const classes = byTenant.get(tenant)!;
    for (const priority of [...classes.keys()].sort(byClass))
      rows.push(row(tenant, priority, classes.get(priority)!, false));
  }
  for (const priority of [...folded.keys()].sort(byClass)) rows.push(row(OTHER, priority, folded.get(priority)!, true));
  return {
    enabled: flow?.enabled ?? false,
    windowSeconds: windows.seconds,
    outcomes: [...windows.outcomes],
    rows,
    tenants: ranked.length,
    folded: foldedTenants,
  };
}
