/**
 * The dashboard's ears: a ProxyObserver that keeps the numbers the page shows and the router
 * does not already know (requests, tokens from the engines' usage, TTFT, request rate, prefill
 * offloads and their prefill and transfer times), and flow control's decisions and tokens per
 * tenant and class for the tenants panel (tenant-window.ts).
 *
 * Every callback is O(1) and allocation-free in steady state: one Map lookup by instance id, a
 * few additions, one slot of a per-second ring (sliding-window.ts). Instance totals are
 * cumulative since the proxy started, like the Prometheus counters they mirror; the rate and
 * the TTFT p90 are over sliding windows.
 *
 * Hazard: an instance's entry outlives its removal from the proxy (a few numbers per backend
 * URL ever configured); the frame lists only the backends the proxy still has.
 */
import type { FlowOutcome, OffloadFallback, ProxyObserver, RequestOutcome, UsageCounts } from '../proxy-observer.js';
import { QuantileWindow, RateWindow } from './sliding-window.js';
import { TenantWindows } from './tenant-window.js';
import { TOP_TENANTS } from './tenants-frame.js';

/** Cumulative counts of one backend, or of the whole fleet. */
export interface RequestTotals {
  /** Requests finished (any status). */
  requests: number;
  /** Finished with a status ≥ 400 (499: the client went away). */
  errors: number;
  /** Upstream attempts that failed (refused, timed out, reset). */
  upstreamErrors: number;
  /** From the engines' `usage`; requests without usage add nothing. */
  promptTokens: number;
  cachedTokens: number;
}

export interface DashboardObserverOptions {
  /** Seconds the request rate is averaged over (default 5). */
  rateWindowSeconds?: number;
  /**
   * Seconds the TTFT p90, the offloads' prefill and transfer p90, and the tenants panel's counts,
   * queue wait p90 and token rates are taken over (default 30).
   */
  ttftWindowSeconds?: number;
  /** Tenants the tenants panel names, by traffic; the rest are summed as `other` (default 10). */
  topTenants?: number;
  /** Milliseconds clock (default Date.now); tests pass a manual one. */
  now?: () => number;
}

const emptyTotals = (): RequestTotals => ({
  requests: 0,
  errors: 0,
  upstreamErrors: 0,
  promptTokens: 0,
  cachedTokens: 0,
});

export class DashboardObserver implements ProxyObserver {
  /** Whole-fleet totals; requests that never reached a backend count here only. */
  readonly fleet = emptyTotals();
  private readonly perInstance = new Map<string, RequestTotals>();
  private readonly engineHitRatios = new Map<string, number>();
  /** Offloaded requests since start: prefills that handed their KV over, and fallbacks to co-located serving. */
  readonly offload = { offloads: 0, fallbacks: 0 };
  private readonly finished: RateWindow;
  private readonly ttft: QuantileWindow;
  private readonly prefill: QuantileWindow;
  private readonly transfer: QuantileWindow;
  /** Flow control's decisions and tokens per tenant and class (the tenants panel). */
  readonly tenants: TenantWindows;
  readonly topTenants: number;
  readonly now: () => number;

  constructor(options: DashboardObserverOptions = {}) {
    this.finished = new RateWindow(options.rateWindowSeconds ?? 5);
    const window = options.ttftWindowSeconds ?? 30;
    this.ttft = new QuantileWindow(window);
    this.prefill = new QuantileWindow(window);
    this.transfer = new QuantileWindow(window);
    this.tenants = new TenantWindows(window);
    this.topTenants = options.topTenants ?? TOP_TENANTS;
    if (!Number.isSafeInteger(this.topTenants) || this.topTenants < 0)
      throw new RangeError(`dashboard topTenants must be an integer ≥ 0, got ${this.topTenants}`);
    this.now = options.now ?? Date.now;
  }

  onOffload(
    _prefillInstance: string,
    _instance: string,
    _policy: string,
    prefillMs: number,
    fallback: OffloadFallback | undefined,
  ): void {
    if (fallback !== undefined) {
      this.offload.fallbacks++;
      return;
    }
    this.offload.offloads++;
    this.prefill.add(this.now(), prefillMs);
  }

  onOffloadTransfer(_instance: string, _policy: string, ms: number): void {
    this.transfer.add(this.now(), ms);
  }

  /** p90 (ms) of the successful prefill phases, and of the streamed decodes' transfer, over the window. */
  offloadP90(nowMs = this.now()): { prefill: number | null; transfer: number | null } {
    return { prefill: this.prefill.quantile(nowMs, 0.9).value, transfer: this.transfer.quantile(nowMs, 0.9).value };
  }

  onFlow(tenant: string, priority: string, outcome: FlowOutcome, waitMs: number, inputTokens: number): void {
    this.tenants.decided(this.now(), tenant, priority, outcome, waitMs, inputTokens);
  }

  onFlowOutput(tenant: string, priority: string, outputTokens: number): void {
    this.tenants.output(this.now(), tenant, priority, outputTokens);
  }

  onFirstByte(_instance: string, ttftMs: number): void {
    this.ttft.add(this.now(), ttftMs);
  }

  onFinished(
    instance: string | undefined,
    status: number,
    _e2eMs: number,
    usage: UsageCounts | undefined,
    outcome?: RequestOutcome,
  ): void {
    this.finished.add(this.now());
    // A stream cut mid-way went out as 200 but failed all the same.
    const failed = status >= 400 || outcome === 'interrupted';
    // Engines' numbers are parsed from text: keep a bogus one (negative, infinite, cached >
    // prompt) from poisoning the totals for the proxy's lifetime.
    const prompt =
      usage !== undefined && usage.prompt_tokens > 0 && usage.prompt_tokens < 2 ** 40 ? usage.prompt_tokens : 0;
    const cached = prompt > 0 && usage!.cached_tokens > 0 ? Math.min(usage!.cached_tokens, prompt) : 0;
    add(this.fleet, failed, prompt, cached);
    if (instance !== undefined) add(this.instance(instance), failed, prompt, cached);
  }

  onUpstreamError(instance: string): void {
    this.fleet.upstreamErrors++;
    this.instance(instance).upstreamErrors++;
  }

  /** Records an engine's own prefix-cache hit ratio (0–1) from its /metrics (a reconcile round). */
  setEngineHitRatio(instance: string, ratio: number): void {
    this.engineHitRatios.set(instance, ratio);
  }

  /** The engine's own ratio as last scraped, or null before any scrape gave one. */
  engineHitRatio(instance: string): number | null {
    return this.engineHitRatios.get(instance) ?? null;
  }

  /** Totals of one backend (zeros if it has seen nothing). Read-only for callers. */
  totals(instance: string): Readonly<RequestTotals> {
    return this.perInstance.get(instance) ?? EMPTY;
  }

  /** Requests finished per second over the rate window. */
  requestRate(nowMs = this.now()): number {
    return this.finished.rate(nowMs);
  }

  /** TTFT p90 (ms) over the TTFT window, null with no samples, and the sample count. */
  ttftP90(nowMs = this.now()): { value: number | null; samples: number } {
    return this.ttft.quantile(nowMs, 0.9);
  }

  private instance(id: string): RequestTotals {
    let totals = this.perInstance.get(id);
    if (totals === undefined) {
      totals = emptyTotals();
      this.perInstance.set(id, totals);
    }
    return totals;
  }
}

const EMPTY: Readonly<RequestTotals> = Object.freeze(emptyTotals());

function add(totals: RequestTotals, failed: boolean, prompt: number, cached: number): void {
  totals.requests++;
  if (failed) totals.errors++;
  totals.promptTokens += prompt;
  totals.cachedTokens += cached;
}

/** cached / prompt, or null before any usage arrived. */
export function hitRate(totals: Readonly<RequestTotals>): number | null {
  return totals.promptTokens > 0 ? totals.cachedTokens / totals.promptTokens : null;
}
