/**
 * One dashboard frame: everything the page shows at an instant, as one JSON object. Built once
 * a second by the sampler and written unchanged to every subscriber, so its cost does not grow
 * with the number of open pages.
 *
 * Where each number comes from:
 * - inFlight, healthy, drained: the proxy's backends (ProxyState.snapshot(); the proxy's own
 *   count of requests it is forwarding, not the router's shadow count);
 * - kvUsage, decisions: the router (router.stats(); effective KV usage, i.e. the larger of the
 *   shadow estimate and a fresh engine-state snapshot; decisions by reason since start);
 * - requests, hit rate, request rate, TTFT p90: the DashboardObserver (engines' usage, the
 *   proxy's first-byte times);
 * - offloads, fallbacks, prefill and transfer p90: the DashboardObserver (the exchanges' offload
 *   phases);
 * - engine hit rate: the engines' own /metrics, handed over by Dashboard.onReconcile;
 * - prefill speed and its observations: the proxy's learned costs (ProxyState.costs, proxy-costs.ts);
 * - tenants: flow control per tenant and class (tenants-frame.ts has each number's source).
 *
 * Cost: router.stats() walks every instance once (µs at fleet sizes kvroute targets); the TTFT
 * quantile merges W × 420 bins. Fine once a second, not per request.
 */
import type { Router } from '../../../core/router.js';
import type { ProxyCosts } from '../../proxy-costs.js';
import type { ProxyState } from '../../proxy-state.js';
import type { ThreadFlowReports } from '../../threads/thread-flow.js';
import { hitRate, type DashboardObserver } from './dashboard-observer.js';
import { buildTenantsFrame, type TenantsFrame } from './tenants-frame.js';

/** What a frame reads of the proxy: a ProxyState is one. */
export interface DashboardSource {
  readonly router: Pick<Router, 'stats'>;
  snapshot: ProxyState['snapshot'];
  /** The learned costs; absent: the column shows none. */
  readonly costs?: Pick<ProxyCosts, 'estimates'>;
  /** Flow control now, the whole process; absent: the tenants panel shows the observer's windows alone. */
  readonly threadFlow?: Pick<ThreadFlowReports, 'flowNow'>;
}

export interface InstanceFrame {
  /** The backend URL (the router's instance id). */
  id: string;
  healthy: boolean;
  drained: boolean;
  inFlight: number;
  /** The models it serves; null while unknown (it then takes any model). */
  models: string[] | null;
  /** Effective KV usage, 0..1; null if the router no longer lists the instance. */
  kvUsage: number | null;
  /** cachedTokens / promptTokens since start; null before any usage arrived. */
  hitRate: number | null;
  /**
   * The engine's own prefix-cache hit ratio from its /metrics at the last reconcile round (all its
   * traffic, streams without usage included); null before one gave it.
   */
  engineHitRate: number | null;
  /** The learned prefill speed, token-equivalents per second; null without learned costs. */
  prefillTokensPerSecond: number | null;
  /** First tokens the learned costs rest on (0: the preset's prior). */
  costObservations: number;
  requests: number;
  errors: number;
  upstreamErrors: number;
  promptTokens: number;
  cachedTokens: number;
}

export interface DashboardFrame {
  /** Epoch milliseconds the frame was built at. */
  t: number;
  policy: string;
  instances: InstanceFrame[];
  /** Routing decisions by reason since the proxy started (one per attempt, retries included). */
  decisions: Record<string, number>;
  /** Requests finished per second, over the observer's rate window. */
  requestRate: number;
  /** TTFT p90 (ms) over the observer's TTFT window; null with no first byte in it. */
  ttftP90Ms: number | null;
  /** First bytes in the TTFT window (how much the p90 rests on). */
  ttftSamples: number;
  /** Requests finished since start, fleet-wide (including those never routed). */
  requestsTotal: number;
  errorsTotal: number;
  /** Fleet-wide cached / prompt tokens since start; null before any usage arrived. */
  hitRate: number | null;
  /** Offloaded requests since start whose prefill handed its KV over. */
  offloads: number;
  /** Offloaded requests since start served co-located after all (the prefill failed or timed out). */
  offloadFallbacks: number;
  /** p90 (ms) of successful prefill phases over the TTFT window; null with none in it. */
  prefillP90Ms: number | null;
  /** p90 (ms) of offloaded streamed decodes' dispatch-to-first-byte (KV transfer + one step); null with none. */
  transferP90Ms: number | null;
  /** The tenants panel: flow control per tenant and class. */
  tenants: TenantsFrame;
}

export function buildFrame(
  observer: DashboardObserver,
  state: DashboardSource,
  nowMs = observer.now(),
): DashboardFrame {
  const stats = state.router.stats();
  const kvUsage = new Map<string, number>();
  for (const s of stats.instances) kvUsage.set(s.instance, s.effective.kvUsage);
  const estimates = state.costs?.estimates() ?? {};
  const instances = state.snapshot().map((b): InstanceFrame => {
    const totals = observer.totals(b.id);
    const learned = estimates[b.id];
    return {
      id: b.id,
      healthy: b.healthy,
      drained: b.drained,
      inFlight: b.inFlight,
      models: b.models ?? null,
      kvUsage: kvUsage.get(b.id) ?? null,
      hitRate: hitRate(totals),
      engineHitRate: observer.engineHitRatio(b.id),
      prefillTokensPerSecond: learned?.prefillTokensPerSecond ?? null,
      costObservations: learned?.ttftObservations ?? 0,
      requests: totals.requests,
      errors: totals.errors,
      upstreamErrors: totals.upstreamErrors,
      promptTokens: totals.promptTokens,
      cachedTokens: totals.cachedTokens,
    };
  });
  const ttft = observer.ttftP90(nowMs);
  const offloadP90 = observer.offloadP90(nowMs);
  return {
    t: nowMs,
    policy: stats.policy.name,
    instances,
    decisions: { ...stats.decisions },
    requestRate: observer.requestRate(nowMs),
    ttftP90Ms: ttft.value,
    ttftSamples: ttft.samples,
    requestsTotal: observer.fleet.requests,
    errorsTotal: observer.fleet.errors,
    hitRate: hitRate(observer.fleet),
    offloads: observer.offload.offloads,
    offloadFallbacks: observer.offload.fallbacks,
    prefillP90Ms: offloadP90.prefill,
    transferP90Ms: offloadP90.transfer,
    tenants: buildTenantsFrame(observer.tenants, state.threadFlow?.flowNow(), nowMs, observer.topTenants),
  };
}
