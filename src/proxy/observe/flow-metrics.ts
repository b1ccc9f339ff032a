/**
 * Flow control's metrics (docs/flow-control.md), per tenant and priority class:
 * - `kvroute_flow_requests_total{tenant,priority,outcome}`: admitted, or refused by cause;
 * - `kvroute_flow_queue_wait_seconds{tenant,priority}`: time in the queue of every decided
 *   request (0 for one that found a free slot);
 * - `kvroute_flow_tokens_total{tenant,kind}`: input tokens let in, output tokens streamed;
 * - `kvroute_flow_queue_depth{tenant,priority}`: requests waiting now (read when scraped);
 * - `kvroute_flow_rate_limit_remaining{tenant,limit}`: what a configured tenant's rpm and tpm
 *   buckets hold now (read when scraped).
 *
 * Hazard: tenants come from clients (a header, an API key's hash), so the label is bounded: the
 * first MAX_TENANT_LABELS tenants seen keep their name, later ones are counted as `other`.
 */
import { Gauge, type Registry } from 'prom-client';

import { hotCounter, hotHistogram } from './hot-metrics.js';
import type { ProxyObserver } from './proxy-observer.js';
import type { ProxyState } from '../proxy-state.js';

const MAX_TENANT_LABELS = 1000;
/** Queue waits (seconds): a free slot's 0 to a long class deadline. */
const WAIT_BUCKETS = [0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export function registerFlowMetrics(
  registry: Registry,
  state: () => ProxyState | undefined,
): Pick<ProxyObserver, 'onFlow' | 'onFlowOutput'> {
  const named = new Set<string>();
  const label = (tenant: string): string => {
    if (named.has(tenant)) return tenant;
    if (named.size >= MAX_TENANT_LABELS) return 'other';
    named.add(tenant);
    return tenant;
  };
  const requests = hotCounter({
    name: 'kvroute_flow_requests_total',
    help: 'Requests flow control decided, by tenant, priority class and outcome (admitted, rate_limited, queue_full, queue_timeout).',
    labelNames: ['tenant', 'priority', 'outcome'] as const,
    registry,
  });
  const waits = hotHistogram({
    name: 'kvroute_flow_queue_wait_seconds',
    help: 'Time a request waited in flow control’s queue before it was admitted or refused (0: a slot was free).',
    labelNames: ['tenant', 'priority'] as const,
    buckets: WAIT_BUCKETS,
    registry,
  });
  const tokens = hotCounter({
    name: 'kvroute_flow_tokens_total',
    help: 'Tokens charged to each tenant: input at admission, output as it streamed.',
    labelNames: ['tenant', 'kind'] as const,
    registry,
  });
  new Gauge({
    name: 'kvroute_flow_queue_depth',
    help: 'Requests waiting for a slot in flow control’s queue, by tenant and priority class.',
    labelNames: ['tenant', 'priority'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const flow = state()?.admission.flow;
      if (flow === undefined) return;
      const classes = flow.flowConfig.classes;
      const depths = new Map<string, number>();
      for (const [tenant, rank, waiting] of flow.depths()) {
        const key = `${label(tenant)}\u0000${classes[rank]!.name}`;
        depths.set(key, (depths.get(key) ?? 0) + waiting);
      }
      for (const [key, waiting] of depths) {
        const [tenant, priority] = key.split('\u0000') as [string, string];
        this.set({ tenant, priority }, waiting);
      }
    },
  });
  new Gauge({
    name: 'kvroute_flow_rate_limit_remaining',
    help: 'What each configured tenant’s rate-limit buckets hold now: requests (rpm) and tokens (tpm); negative when output overdrew it.',
    labelNames: ['tenant', 'limit'] as const,
    registers: [registry],
    collect() {
      this.reset();
      const flow = state()?.admission.flow;
      if (flow === undefined) return;
      const now = performance.now();
      for (const tenant of Object.keys(flow.flowConfig.tenants)) {
        const { requests: rpm, tokens: tpm } = flow.remaining(tenant, now);
        if (rpm !== undefined) this.set({ tenant, limit: 'rpm' }, rpm);
        if (tpm !== undefined) this.set({ tenant, limit: 'tpm' }, tpm);
      }
    },
  });
  return {
    onFlow(tenant, priority, outcome, waitMs, inputTokens) {
      const name = label(tenant);
      requests.cell(name, priority, outcome).value++;
      waits.cell(name, priority).observe(waitMs / 1000);
      if (inputTokens > 0) tokens.cell(name, 'input').value += inputTokens;
    },
    onFlowOutput(tenant, _priority, outputTokens) {
      tokens.cell(label(tenant), 'output').value += outputTokens;
    },
  };
}
