/**
 * Flow control's state now, for the whole process of `kvroute serve --threads N`
 * (docs/flow-control.md): the one queue is the main thread's (flow-hub.ts; a thread's own queue
 * stays empty, so its `waiting` part is too), and every thread keeps 1/N of every tenant's
 * rate-limit buckets (thread-limits.ts), so what a tenant's buckets hold is the main thread's
 * plus every other thread's. A thread sends its part (reportFlow) with its observer
 * batches (observer-relay.ts); the main thread keeps each thread's last part (ThreadFlowReports)
 * and adds its own live numbers (flowNow: ProxyState.threadFlow), for the dashboard's tenants panel.
 *
 * Invariants:
 * - A report lists only tenants with requests waiting and tenants whose buckets are not full; a
 *   tenant a thread does not list holds full buckets there. Every thread runs the same scaled
 *   config, so "full" on a thread is what a full bucket holds on the main thread.
 * - A thread that exits has its report dropped (set(thread, undefined)).
 *
 * Staleness: another thread's part is as old as its last report (REPORT_MS in the relay, plus one
 * batch in flight); the main thread's part is live.
 */
import type { Admission } from '../exchange/admission.js';

/** A thread's flow control, as it sends it to the main thread (structured-clone data). */
export interface FlowReport {
  /** [tenant, class rank, requests waiting], for tenants with requests waiting. */
  waiting: Array<[string, number, number]>;
  /** [tenant, requests left, tokens left] of tenants whose buckets are not full; null: no such limit. */
  drawn: Array<[string, number | null, number | null]>;
}

/** A tenant's rate limits (whole process) and what its buckets hold now, summed over threads. */
export interface TenantLimitsNow {
  /** Requests per minute; null: no such limit (and no remaining). */
  rpm: number | null;
  rpmRemaining: number | null;
  /** Tokens per minute; null: no such limit. */
  tpm: number | null;
  tpmRemaining: number | null;
}

/** What the process's flow control holds now. */
export interface FlowNow {
  /** A request can wait or be refused: --max-in-flight is set, or some tenant has rpm or tpm. */
  enabled: boolean;
  /** Class names, highest priority first. */
  classes: readonly string[];
  /** [tenant, class name, requests waiting] over every thread; a pair appears once. */
  waiting: Array<[string, string, number]>;
  /** The tenant's limits and remaining, or undefined when it has neither rpm nor tpm. */
  limits(tenant: string): TenantLimitsNow | undefined;
}

/** This thread's part of flow control now. O(tenants waiting + tenants with drawn buckets). */
export function reportFlow(admission: Admission, now: number): FlowReport {
  const flow = admission.flow;
  const drawn: FlowReport['drawn'] = [];
  for (const [tenant, requests, tokens] of flow.drawn(now)) drawn.push([tenant, requests ?? null, tokens ?? null]);
  return { waiting: [...flow.depths()], drawn };
}

/** The main thread's copy of every other thread's last FlowReport. */
export class ThreadFlowReports {
  private readonly waiting = new Map<number, FlowReport['waiting']>();
  private readonly drawn = new Map<number, Map<string, [number | null, number | null]>>();

  /** @param admission the main thread's own flow control, read live. */
  constructor(private readonly admission: Admission) {}

  /** A thread's new report, or undefined once it exited. */
  set(thread: number, report: FlowReport | undefined): void {
    if (report === undefined) {
      this.waiting.delete(thread);
      this.drawn.delete(thread);
      return;
    }
    this.waiting.set(thread, report.waiting);
    this.drawn.set(thread, new Map(report.drawn.map(([tenant, r, t]) => [tenant, [r, t]])));
  }

  /** The process's flow control: the main thread's `admission` live, plus the threads' reports. */
  flowNow(now = performance.now()): FlowNow {
    const admission = this.admission;
    const flow = admission.flow;
    const config = admission.config; // whole-process limits
    const classes = config.classes.map((c) => c.name);
    const sums = new Map<string, number>();
    const add = (tenant: string, rank: number, n: number): void => {
      const key = `${tenant}\u0000${rank}`;
      sums.set(key, (sums.get(key) ?? 0) + n);
    };
    for (const [tenant, rank, n] of flow.depths()) add(tenant, rank, n);
    for (const list of this.waiting.values()) for (const [tenant, rank, n] of list) add(tenant, rank, n);
    const waiting: FlowNow['waiting'] = [];
    for (const [key, n] of sums) {
      const cut = key.lastIndexOf('\u0000');
      const name = classes[Number(key.slice(cut + 1))];
      if (name !== undefined) waiting.push([key.slice(0, cut), name, n]);
    }
    const limited = (t: { rpm?: number; tpm?: number }) => t.rpm !== undefined || t.tpm !== undefined;
    return {
      enabled: admission.limited || limited(config.tenantDefaults) || Object.values(config.tenants).some(limited),
      classes,
      waiting,
      limits: (tenant) => {
        const whole = config.tenants[tenant] ?? config.tenantDefaults;
        if (!limited(whole)) return undefined;
        const own = flow.remaining(tenant, now);
        // A thread's bucket that it did not report is full: what a full one holds here (same share).
        const share = flow.tenant(tenant);
        let requests = own.requests ?? 0;
        let tokens = own.tokens ?? 0;
        for (const drawn of this.drawn.values()) {
          const d = drawn.get(tenant);
          requests += d?.[0] ?? share.rpmBurst ?? share.rpm ?? 0;
          tokens += d?.[1] ?? share.tpmBurst ?? share.tpm ?? 0;
        }
        return {
          rpm: whole.rpm ?? null,
          rpmRemaining: whole.rpm === undefined ? null : requests,
          tpm: whole.tpm ?? null,
          tpmRemaining: whole.tpm === undefined ? null : tokens,
        };
      },
    };
  }
}
