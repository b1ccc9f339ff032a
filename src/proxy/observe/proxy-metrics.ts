/**
 * The proxy's Prometheus metrics (prom-client): a ProxyObserver that counts every request's
 * lifecycle, and a ProxyMount that serves them at GET /metrics in the text exposition format.
 *
 * Names follow `kvroute_<noun>_total` / `_seconds`, labelled by `instance` (the backend URL) and
 * `policy`; the routing-decision histogram is in microseconds because the issue and operators
 * read it so (a decision takes 1–10 µs, where second-based buckets would all read 0.00000x).
 * Gauges that mirror state (in-flight, health, KV usage, hit ratio) are read from the proxy's
 * state when scraped, never kept up to date per request.
 *
 * Cost per request: a few additions into label-set cells (hot-metrics.ts), which prom-client reads
 * when scraped; steady state allocates nothing but the label-key string of a cell lookup.
 *
 * Hazard: `status` is the status sent to the client. Engine statuses pass through unchanged, so
 * the label's values are bounded by HTTP's, not by anything a client controls. `model` is a
 * model some backend serves (the exchange reports '' for one nobody serves, which got 404), so
 * it is bounded by the fleet's models too.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';

import { registerCostMetrics } from './cost-metrics.js';
import { registerFlowMetrics } from './flow-metrics.js';
import { registerKvEventMetrics } from './kv-event-metrics.js';

import { hotCounter, hotHistogram } from './hot-metrics.js';

import type { ProxyObserver, RequestOutcome, UpstreamErrorKind, UsageCounts } from './proxy-observer.js';
import type { ProxyMount } from '../proxy-options.js';
import type { ReconcileResult } from '../../state/shadow-reconciler.js';
import type { ProxyState } from '../proxy-state.js';

/** vLLM's TTFT buckets (seconds), so the two dashboards line up. */
const TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
/** vLLM's end-to-end latency buckets (seconds). */
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];
/** Routing decision time (µs): the addon's route() is ~1 µs; the tail shows event-loop stalls. */
const DECISION_BUCKETS = [0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000];
/** An offload's prefill phase and KV transfer (seconds): tens of ms to a long prompt's minute. */
const OFFLOAD_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80];

export interface ProxyMetrics {
  /** Hears the proxy's requests; pass it in `createProxy({ observers })`. */
  readonly observer: ProxyObserver;
  /** Serves GET /metrics; pass it in `createProxy({ mounts })`. */
  readonly mount: ProxyMount;
  readonly registry: Registry;
  /**
   * Takes a ShadowReconciler round (its `onRound` results): each engine's own prefix-cache hit
   * ratio becomes `kvroute_engine_prefix_cache_hit_ratio`. An engine that did not answer keeps
   * its last value.
   */
  onReconcile(results: readonly ReconcileResult[]): void;
}

export interface ProxyMetricsOptions {
  /** Register into this registry (default: a new one, so two proxies in one process don't collide). */
  registry?: Registry;
  /** Also export prom-client's process and Node.js metrics (default true). */
  defaultMetrics?: boolean;
}

export function createProxyMetrics(options: ProxyMetricsOptions = {}): ProxyMetrics {
  const registry = options.registry ?? new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry });
  let state: ProxyState | undefined;
  let policy = '';
  const registers = [registry];

  const requests = hotCounter({
    name: 'kvroute_requests_total',
    help:
      'Requests finished, by the instance that served them (none: never routed), policy, HTTP status, outcome ' +
      '(success, error, interrupted: cut after its status went out, client_abort) and model ("" when unknown or never parsed).',
    labelNames: ['instance', 'policy', 'status', 'outcome', 'model'] as const,
    registry,
  });
  const decisions = hotCounter({
    name: 'kvroute_routing_decisions_total',
    help: 'Routing decisions (one per attempt, retries included), by instance, policy and reason.',
    labelNames: ['instance', 'policy', 'reason'] as const,
    registry,
  });
  const decisionMicros = hotHistogram({
    name: 'kvroute_routing_decision_microseconds',
    help: 'Wall time of one routing decision (the router call), in microseconds.',
    labelNames: ['policy'] as const,
    buckets: DECISION_BUCKETS,
    registry,
  });
  const ttft = hotHistogram({
    name: 'kvroute_time_to_first_token_seconds',
    help: 'From the request arriving to the first upstream body byte.',
    labelNames: ['instance'] as const,
    buckets: TTFT_BUCKETS,
    registry,
  });
  const e2e = hotHistogram({
    name: 'kvroute_e2e_request_latency_seconds',
    help: 'From the request arriving to its last byte sent (or its failure), by instance and model.',
    labelNames: ['instance', 'model'] as const,
    buckets: E2E_BUCKETS,
    registry,
  });
  const promptTokens = hotCounter({
    name: 'kvroute_prompt_tokens_total',
    help: "Prompt tokens of finished requests, from the engines' usage, by instance and model.",
    labelNames: ['instance', 'model'] as const,
    registry,
  });
  const cachedTokens = hotCounter({
    name: 'kvroute_cached_tokens_total',
    help: 'Prompt tokens the engines served from their prefix cache (usage.prompt_tokens_details.cached_tokens), by instance and model.',
    labelNames: ['instance', 'model'] as const,
    registry,
  });
  const upstreamErrors = new Counter({
    name: 'kvroute_upstream_errors_total',
    help: 'Failed upstream attempts, by instance, kind and whether the client had already got bytes.',
    labelNames: ['instance', 'kind', 'after_first_byte'] as const,
    registers,
  });
  const retries = new Counter({
    name: 'kvroute_retries_total',
    help: 'Requests routed again after failing on `instance` before their first byte.',
    labelNames: ['instance'] as const,
    registers,
  });
  const offloads = hotCounter({
    name: 'kvroute_offloads_total',
    help:
      'Offloaded requests whose prefill answered with kv_transfer_params, by prefill instance, decode instance ' +
      '(`instance`) and policy.',
    labelNames: ['prefill_instance', 'instance', 'policy'] as const,
    registry,
  });
  const offloadFallbacks = hotCounter({
    name: 'kvroute_offload_fallbacks_total',
    help:
      'Offloaded requests served co-located on their decode instance (`instance`) after all, by prefill instance, ' +
      'policy and cause (error: connection failed, status: non-2xx, timeout: --offload-prefill-timeout, params: ' +
      'no usable kv_transfer_params).',
    labelNames: ['prefill_instance', 'instance', 'policy', 'cause'] as const,
    registry,
  });
  const prefillSeconds = hotHistogram({
    name: 'kvroute_offload_prefill_seconds',
    help: "An offload's prefill phase that succeeded: the prefill request sent to its answer read, by prefill instance.",
    labelNames: ['instance', 'policy'] as const,
    buckets: OFFLOAD_BUCKETS,
    registry,
  });
  const transferSeconds = hotHistogram({
    name: 'kvroute_offload_transfer_seconds',
    help: 'An offloaded, streamed decode: its request sent to its first body byte (the KV transfer plus one decode step), by decode instance.',
    labelNames: ['instance', 'policy'] as const,
    buckets: OFFLOAD_BUCKETS,
    registry,
  });
  const hitRatios = new Map<string, { prompt: number; cached: number }>();
  /** A per-instance gauge whose values are read from state at scrape time. */
  const stateGauge = (name: string, help: string, read: () => Iterable<[string, number]>) =>
    new Gauge({
      name,
      help,
      labelNames: ['instance'] as const,
      registers,
      collect() {
        this.reset();
        for (const [instance, value] of read()) this.set({ instance }, value);
      },
    });
  const backends = () => state?.snapshot() ?? [];
  stateGauge(
    'kvroute_prefix_cache_hit_ratio',
    'APC: cached / prompt tokens since start, from the engines’ usage (absent until a request reports usage).',
    () => [...hitRatios].filter(([, t]) => t.prompt > 0).map(([instance, t]) => [instance, t.cached / t.prompt]),
  );
  new Gauge({
    name: 'kvroute_queue_depth',
    help: 'Requests waiting for an admission slot (--max-in-flight); 0 without a limit.',
    registers,
    collect() {
      this.set(state?.admission.queued ?? 0);
    },
  });
  new Counter({
    name: 'kvroute_admission_refused_total',
    help: 'Requests refused with 429 by flow control: queue_full, queue_timeout after waiting, or rate_limited.',
    labelNames: ['reason'] as const,
    registers,
    collect() {
      this.reset();
      const refused = state?.admission.refused ?? { queue_full: 0, queue_timeout: 0, rate_limited: 0 };
      for (const [reason, n] of Object.entries(refused)) this.inc({ reason }, n);
    },
  });
  registerKvEventMetrics(registry, () => state);
  registerCostMetrics(registry, () => state);
  const flowObserver = registerFlowMetrics(registry, () => state);
  const engineHitRatios = new Map<string, number>();
  stateGauge(
    'kvroute_engine_prefix_cache_hit_ratio',
    "The engine's own prefix-cache hit ratio since it started (vLLM prefix_cache_hits / queries, SGLang cache_hit_rate), from its /metrics at each reconcile round; covers all its traffic.",
    () => backends().flatMap((b) => (engineHitRatios.has(b.id) ? [[b.id, engineHitRatios.get(b.id)!]] : [])),
  );
  stateGauge('kvroute_in_flight_requests', 'Requests dispatched to the instance and not yet finished.', () =>
    backends().map((b) => [b.id, b.inFlight]),
  );
  stateGauge(
    'kvroute_backend_healthy',
    '1 while the backend takes requests (circuit breaker closed, not drained), else 0.',
    () => backends().map((b) => [b.id, b.healthy && !b.drained ? 1 : 0]),
  );
  stateGauge(
    'kvroute_kv_usage_ratio',
    "The router's effective KV usage of the instance: max(shadow, fresh engine state), 0-1.",
    () => (state?.router.stats().instances ?? []).map((i) => [i.instance, i.effective.kvUsage]),
  );

  const observer: ProxyObserver = {
    onRouted(instance: string, reason: string, routedPolicy: string, micros: number) {
      policy = routedPolicy;
      decisions.cell(instance, routedPolicy, reason).value++;
      decisionMicros.cell(routedPolicy).observe(micros);
    },
    onFirstByte(instance: string, ttftMs: number) {
      ttft.cell(instance).observe(ttftMs / 1000);
    },
    onFinished(
      instance: string | undefined,
      status: number,
      e2eMs: number,
      usage: UsageCounts | undefined,
      outcome: RequestOutcome,
      model: string,
    ) {
      const label = instance ?? 'none';
      // The policy of the request's last decision, or the router's now when it was never routed.
      const routedPolicy = instance === undefined ? currentPolicy() : policy;
      requests.cell(label, routedPolicy, String(status), outcome, model).value++;
      if (instance === undefined) return;
      e2e.cell(instance, model).observe(e2eMs / 1000);
      if (usage === undefined) return;
      promptTokens.cell(instance, model).value += usage.prompt_tokens;
      cachedTokens.cell(instance, model).value += usage.cached_tokens;
      const t = hitRatios.get(instance) ?? { prompt: 0, cached: 0 };
      t.prompt += usage.prompt_tokens;
      t.cached += usage.cached_tokens;
      hitRatios.set(instance, t);
    },
    onUpstreamError(instance: string, kind: UpstreamErrorKind, afterFirstByte: boolean) {
      upstreamErrors.inc({ instance, kind, after_first_byte: afterFirstByte ? 'true' : 'false' });
    },
    onRetry(instance: string) {
      retries.inc({ instance });
    },
    onOffload(prefillInstance, instance, routedPolicy, prefillMs, fallback) {
      if (fallback !== undefined) {
        offloadFallbacks.cell(prefillInstance, instance, routedPolicy, fallback).value++;
        return;
      }
      offloads.cell(prefillInstance, instance, routedPolicy).value++;
      prefillSeconds.cell(prefillInstance, routedPolicy).observe(prefillMs / 1000);
    },
    onOffloadTransfer(instance, routedPolicy, ms) {
      transferSeconds.cell(instance, routedPolicy).observe(ms / 1000);
    },
    ...flowObserver,
  };
  const currentPolicy = () => state?.router.policy.name ?? policy;

  const mount: ProxyMount = (app, proxyState) => {
    state = proxyState;
    app.get('/metrics', (res) => {
      let aborted = false;
      res.onAborted(() => (aborted = true));
      registry.metrics().then(
        (text) => {
          if (aborted) return;
          res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', registry.contentType).end(text));
        },
        (error: unknown) => {
          if (aborted) return;
          res.cork(() =>
            res
              .writeStatus('500 Internal Server Error')
              .writeHeader('content-type', 'text/plain; charset=utf-8')
              .end(`collecting metrics failed: ${String(error)}\n`),
          );
        },
      );
    });
  };
  const onReconcile = (results: readonly ReconcileResult[]) => {
    for (const r of results)
      if (r.prefixCacheHitRatio !== undefined) engineHitRatios.set(r.instance, r.prefixCacheHitRatio);
  };
  return { observer, mount, registry, onReconcile };
}
