/**
 * The dashboard's tenants panel data (src/proxy/observe/dashboard/tenant-window.ts,
 * tenants-frame.ts; src/proxy/threads/thread-flow.ts), against a manual clock: decisions by
 * outcome, queue wait p90 and tokens per minute over the window, ageing out; a new outcome
 * (a refusal cause flow control does not have yet) becomes a column by itself; the tenant bound
 * and the top-N folding into `other` with merged p90; requests waiting and rate-limit remaining
 * summed over the main thread and the other threads' reports; and the relay that carries those
 * reports. The page itself is checked in test/dashboard.test.ts (headless Chromium).
 */
import { describe, expect, it } from 'vitest';

import { resolveFlowConfig } from '../src/flow/flow-config.js';
import { Admission, type Admittable } from '../src/proxy/exchange/admission.js';
import { DashboardObserver } from '../src/proxy/observe/dashboard/dashboard-observer.js';
import {
  MAX_TENANTS,
  TenantWindows,
  waitBin,
  waitBinValue,
  WAIT_BINS,
} from '../src/proxy/observe/dashboard/tenant-window.js';
import { buildTenantsFrame, type TenantRow } from '../src/proxy/observe/dashboard/tenants-frame.js';
import type { FlowOutcome } from '../src/proxy/observe/proxy-observer.js';
import { ObserverRelay } from '../src/proxy/threads/observer-relay.js';
import { reportFlow, ThreadFlowReports, type FlowNow } from '../src/proxy/threads/thread-flow.js';
import type { ToPrimary } from '../src/proxy/threads/thread-messages.js';
import { ClientError } from '../src/proxy/server/error-body.js';

const noFlow: FlowNow = { enabled: false, classes: ['high', 'normal', 'low'], waiting: [], limits: () => undefined };
const within = (value: number | null, exact: number, tolerance: number) =>
  expect(Math.abs(value! - exact) / exact).toBeLessThan(tolerance);
const rowOf = (rows: TenantRow[], tenant: string, priority: string) =>
  rows.find((r) => r.tenant === tenant && r.priority === priority);

class Waiter implements Admittable {
  admit(): void {}
  expire(_error: ClientError): void {}
}

describe('tenant windows', () => {
  it('wait bins read within 12% and hold 0 and the extremes', () => {
    for (const ms of [1, 3, 42, 1_000, 30_000, 300_000]) within(waitBinValue(waitBin(ms)), ms, 0.12);
    expect(waitBin(0)).toBe(0);
    expect(waitBinValue(waitBin(0.4))).toBe(0);
    expect(waitBin(Number.NaN)).toBe(0);
    expect(waitBin(1e12)).toBe(WAIT_BINS - 1);
  });

  it('counts decisions by outcome, the wait p90 and tokens per minute over the window, then ages out', () => {
    let now = 100_000;
    const o = new DashboardObserver({ now: () => now, ttftWindowSeconds: 10 });
    for (let i = 1; i <= 10; i++) o.onFlow('acme', 'normal', 'admitted', i * 100, 1_000); // waits 100..1,000 ms
    o.onFlow('acme', 'normal', 'queue_timeout', 30_000, 0);
    o.onFlow('acme', 'high', 'rate_limited', 0, 0);
    o.onFlow('beta', 'normal', 'queue_full', 0, 0);
    o.onFlowOutput('acme', 'normal', 500);
    now += 4_000;
    o.onFlow('acme', 'normal', 'admitted', 0, 1_000);

    const f = buildTenantsFrame(o.tenants, noFlow, now);
    expect(f.outcomes).toEqual(['admitted', 'rate_limited', 'queue_full', 'queue_timeout']);
    expect(f.rows.map((r) => `${r.tenant}/${r.priority}`)).toEqual(['acme/high', 'acme/normal', 'beta/normal']);
    const acme = rowOf(f.rows, 'acme', 'normal')!;
    expect(acme.outcomes).toEqual({ admitted: 11, rate_limited: 0, queue_full: 0, queue_timeout: 1 });
    // 12 waits: 0, 100..1,000, 30,000; nearest rank ceil(0.9 × 12) = 11: the 1,000 ms one.
    within(acme.waitP90Ms, 1_000, 0.12);
    expect(acme.inputTokensPerMinute).toBe((11_000 * 60) / 10);
    expect(acme.outputTokensPerMinute).toBe((500 * 60) / 10);
    expect(rowOf(f.rows, 'acme', 'high')).toMatchObject({ outcomes: { rate_limited: 1 }, waitP90Ms: 0 });
    expect(rowOf(f.rows, 'beta', 'normal')!.outcomes.queue_full).toBe(1);
    expect(f).toMatchObject({ enabled: false, windowSeconds: 10, tenants: 2, folded: 0 });

    now += 7_000; // the first second left the window, the later one did not
    const later = buildTenantsFrame(o.tenants, noFlow, now);
    expect(later.rows.map((r) => `${r.tenant}/${r.priority}`)).toEqual(['acme/normal']);
    expect(later.rows[0]!.outcomes).toMatchObject({ admitted: 1, queue_timeout: 0 });
    expect(later.rows[0]!.waitP90Ms).toBe(0);
    now += 10_000;
    expect(buildTenantsFrame(o.tenants, noFlow, now).rows).toEqual([]);
    expect(o.tenants.size).toBe(0); // pruned: their places under the bound are free again
  });

  it('a new outcome becomes a column without a code change', () => {
    const w = new TenantWindows(30);
    w.decided(5_000, 'acme', 'low', 'shed' as FlowOutcome, 0, 0);
    w.decided(5_000, 'acme', 'low', 'shed' as FlowOutcome, 0, 0);
    const f = buildTenantsFrame(w, noFlow, 5_500);
    expect(f.outcomes).toEqual(['admitted', 'rate_limited', 'queue_full', 'queue_timeout', 'shed']);
    expect(f.rows[0]!.outcomes).toEqual({ admitted: 0, rate_limited: 0, queue_full: 0, queue_timeout: 0, shed: 2 });
  });

  it('tracks at most MAX_TENANTS tenants; later ones count as other', () => {
    const w = new TenantWindows(5);
    for (let i = 0; i < MAX_TENANTS + 50; i++) w.decided(1_000, `t${i}`, 'normal', 'admitted', 0, 0);
    expect(w.size).toBe(MAX_TENANTS + 1);
    const f = buildTenantsFrame(w, noFlow, 1_000, 3);
    expect(f.rows).toHaveLength(4);
    const other = rowOf(f.rows, 'other', 'normal')!;
    expect(other).toMatchObject({ other: true, limits: null });
    expect(other.outcomes.admitted).toBe(MAX_TENANTS + 50 - 3);
  });
});

describe('the tenants frame', () => {
  it('names the top tenants by traffic and waiting, folds the rest into other per class', () => {
    const w = new TenantWindows(30);
    const t = 60_000;
    for (let i = 0; i < 9; i++) w.decided(t, 'big', 'normal', 'admitted', 10, 100);
    for (let i = 0; i < 5; i++) w.decided(t, 'mid', 'low', 'admitted', 20, 10);
    w.decided(t, 'small-a', 'low', 'queue_timeout', 4_000, 0);
    w.decided(t, 'small-b', 'low', 'admitted', 8_000, 10);
    w.decided(t, 'small-b', 'high', 'admitted', 0, 10);
    const flow: FlowNow = {
      enabled: true,
      classes: ['high', 'normal', 'low'],
      waiting: [
        ['queued-only', 'normal', 7], // nothing decided yet, 7 waiting: second by traffic
        ['small-a', 'low', 1],
      ],
      limits: (tenant) =>
        tenant === 'big' ? { rpm: 600, rpmRemaining: 591, tpm: null, tpmRemaining: null } : undefined,
    };
    const f = buildTenantsFrame(w, flow, t + 500, 3);
    expect(f.rows.map((r) => `${r.tenant}/${r.priority}`)).toEqual([
      'big/normal',
      'queued-only/normal',
      'mid/low',
      'other/high',
      'other/low',
    ]);
    expect(f).toMatchObject({ enabled: true, tenants: 5, folded: 2 });
    expect(rowOf(f.rows, 'big', 'normal')!.limits).toEqual({
      rpm: 600,
      rpmRemaining: 591,
      tpm: null,
      tpmRemaining: null,
    });
    expect(rowOf(f.rows, 'queued-only', 'normal')).toMatchObject({ waiting: 7, waitP90Ms: null, limits: null });
    const otherLow = rowOf(f.rows, 'other', 'low')!;
    expect(otherLow).toMatchObject({ other: true, waiting: 1 });
    expect(otherLow.outcomes).toMatchObject({ admitted: 1, queue_timeout: 1 });
    within(otherLow.waitP90Ms, 8_000, 0.12); // the merged bins of small-a and small-b
    expect(rowOf(f.rows, 'other', 'high')!.outcomes.admitted).toBe(1);
    expect(buildTenantsFrame(w, flow, t + 500, 0).rows.every((r) => r.other)).toBe(true);
  });
});

describe('flow control of the whole process (thread-flow.ts)', () => {
  it('adds the other threads’ waiting and buckets to the main thread’s, a silent thread at full buckets', () => {
    // Two threads: each enforces half of metered's 60 rpm (a bucket of 30).
    const config = resolveFlowConfig({ tenants: { metered: { rpm: 60 } } });
    const limits = { maxInFlight: 1, queueSize: 10, queueTimeoutMs: 60_000 };
    const main = new Admission(limits, config, 0.5);
    const other = new Admission(limits, config, 0.5);
    const entry = (tenant: string, classRank: number) => ({ tenant, classRank, cost: 1, inputTokens: 1 });
    for (const a of [main, other]) {
      expect(a.enter(new Waiter(), entry('metered', 1))).toBe('go'); // takes the slot
      expect(a.enter(new Waiter(), entry('metered', 1))).toBe('queued');
      expect(a.enter(new Waiter(), entry('free', 2))).toBe('queued');
    }
    expect(other.enter(new Waiter(), entry('metered', 2))).toBe('queued');
    const reports = new ThreadFlowReports(main);
    const now = performance.now();
    const alone = reports.flowNow(now);
    expect(alone.enabled).toBe(true);
    expect(alone.limits('metered')!.rpmRemaining).toBeCloseTo(28, 0); // 30 less its two requests

    const report = reportFlow(other, now);
    expect(report.drawn.map((d) => d[0])).toEqual(['metered']); // `free` has no limit, so no buckets
    reports.set(1, report);
    const both = reports.flowNow(now);
    const waiting = Object.fromEntries(both.waiting.map(([t, c, n]) => [`${t}/${c}`, n]));
    expect(waiting).toEqual({ 'metered/normal': 2, 'metered/low': 1, 'free/low': 2 });
    const metered = both.limits('metered')!;
    expect(metered).toMatchObject({ rpm: 60, tpm: null, tpmRemaining: null });
    expect(metered.rpmRemaining).toBeGreaterThan(28 + 27 - 0.01); // both threads' buckets
    expect(metered.rpmRemaining).toBeLessThan(55.1); // refilling at 1 a second, for milliseconds
    expect(both.limits('free')).toBeUndefined();

    reports.set(2, { waiting: [], drawn: [] }); // a third thread that never served metered: full
    expect(reports.flowNow(now).limits('metered')!.rpmRemaining).toBeGreaterThan(55 + 30 - 0.01);
    reports.set(2, undefined);
    reports.set(1, undefined); // the thread exited
    expect(reports.flowNow(now).waiting).toEqual([
      ['metered', 'normal', 1],
      ['free', 'low', 1],
    ]);
    expect(
      new ThreadFlowReports(new Admission({ ...limits, maxInFlight: 0 }, resolveFlowConfig(undefined))).flowNow()
        .enabled,
    ).toBe(false);
  });

  it('the relay sends a thread’s report on its first flush, then at most every 250 ms', () => {
    const sent: ToPrimary[] = [];
    let asked = 0;
    const relay = new ObserverRelay(
      (m) => sent.push(m),
      () => ({}),
      false,
      () => (asked++, { waiting: [['acme', 1, 2]], drawn: [] }),
    );
    try {
      relay.observer.onFlow!('acme', 'normal', 'admitted', 3, 10);
      relay.flush();
      relay.flush();
      const [first, second] = sent as Array<Extract<ToPrimary, { type: 'observed' }>>;
      expect(first!.flow).toEqual({ waiting: [['acme', 1, 2]], drawn: [] });
      expect(first!.calls).toEqual([['onFlow', 'acme', 'normal', 'admitted', 3, 10]]);
      expect(second!.flow).toBeUndefined();
      expect(asked).toBe(1);
    } finally {
      relay.close();
    }
  });
});
