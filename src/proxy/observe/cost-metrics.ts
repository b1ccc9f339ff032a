/**
 * The learned per-instance costs as Prometheus gauges (docs/metrics.md "Learned costs"), read from
 * the proxy's learner (proxy-costs.ts) when scraped, never kept per request. They are exported
 * with `--costs learned` and `--costs fixed` alike: under `fixed` the learner watches without
 * steering, so the two can be compared.
 *
 * Each gauge is labelled by `instance`; an instance without an observation shows its prior (the
 * preset's), and says so by `kvroute_instance_cost_observations` 0. `kind` is `ttft` (first
 * tokens, the prefill model) or `decode` (per-token decode samples: completed answers and the
 * engines' inter-token latency histograms).
 */
import { Gauge, type Registry } from 'prom-client';

import type { InstanceCostEstimate } from '../../core/cost-learning/index.js';
import type { ProxyState } from '../proxy-state.js';

type EstimateField = keyof Pick<
  InstanceCostEstimate,
  | 'prefillTokensPerSecond'
  | 'prefillOverheadSeconds'
  | 'interference'
  | 'decodeStepSeconds'
  | 'decodeSecondsPerSequence'
>;

const GAUGES: ReadonlyArray<readonly [string, EstimateField, string]> = [
  [
    'kvroute_instance_prefill_tokens_per_second',
    'prefillTokensPerSecond',
    'Learned prefill speed of the instance, token-equivalents per second (1 / its learned prefill seconds per token).',
  ],
  [
    'kvroute_instance_prefill_overhead_seconds',
    'prefillOverheadSeconds',
    'Learned seconds of every first token that do not grow with the prompt (scheduling, one step).',
  ],
  [
    'kvroute_instance_interference',
    'interference',
    'Learned slow-down of a prefill per request running on the instance (reported; min_ttft keeps its batchWeight).',
  ],
  ['kvroute_instance_decode_step_seconds', 'decodeStepSeconds', 'Learned decode step time of the instance, seconds.'],
  [
    'kvroute_instance_decode_seconds_per_sequence',
    'decodeSecondsPerSequence',
    'Learned decode step time added by each running sequence, seconds.',
  ],
];

/** Registers the learned-cost gauges into `registry`; `state()` is the proxy once mounted. */
export function registerCostMetrics(registry: Registry, state: () => ProxyState | undefined): void {
  const registers = [registry];
  const estimates = (): Array<[string, InstanceCostEstimate]> => Object.entries(state()?.costs.estimates() ?? {});
  for (const [name, field, help] of GAUGES)
    new Gauge({
      name,
      help,
      labelNames: ['instance'] as const,
      registers,
      collect() {
        this.reset();
        for (const [instance, estimate] of estimates()) this.set({ instance }, estimate[field]);
      },
    });
  new Gauge({
    name: 'kvroute_instance_cost_observations',
    help: 'Observations the learned costs of the instance rest on: kind ttft (first tokens) or decode (decode samples).',
    labelNames: ['instance', 'kind'] as const,
    registers,
    collect() {
      this.reset();
      for (const [instance, estimate] of estimates()) {
        this.set({ instance, kind: 'ttft' }, estimate.ttftObservations);
        this.set({ instance, kind: 'decode' }, estimate.decodeObservations);
      }
    },
  });
}
