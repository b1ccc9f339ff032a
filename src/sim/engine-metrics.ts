/**
 * `/metrics` of one simulated engine: vLLM V1's Prometheus names, labelled `model_name` and
 * `engine`, or with the SGLang flavour SGLang's names and scheduler labels (engine-flavor.ts).
 *
 * Each engine has its own prom-client Registry (never the global one), so engines in one process
 * never mix. Gauges and the engine-side counters are read from the model at scrape time (collect
 * callbacks); the latency histograms are observed as tokens are delivered. Times are the model's
 * virtual seconds: at `--speed 1` they are wall seconds, at `--speed 10` they are what the
 * simulated GPU would report, ten times the wall time they took.
 *
 * prom-client writes a counter's name as given (no `_total` appended), so counters are named
 * with the engines' exported `_total` suffix. Histogram buckets are vLLM's for both flavours.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

import { METRIC_NAMES, type EngineFlavor } from './engine-flavor.js';
import type { EngineModel } from './engine-model.js';
import type { RealtimeEngine } from './realtime-engine.js';
import { scrapedCounter } from './scraped-counter.js';

const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
];
const ITL_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80];
const E2E_BUCKETS = [0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680];

export class EngineMetrics {
  readonly registry = new Registry();
  private readonly ttft: Histogram;
  private readonly itl: Histogram;
  private readonly e2e: Histogram;
  /** vLLM's request_success_total by finished_reason, or SGLang's num_requests_total. */
  private readonly finishedCounter: { inc(): void };

  constructor(engine: EngineModel, realtime: RealtimeEngine, flavor: EngineFlavor, labels: Record<string, string>) {
    const registers = [this.registry];
    const names = METRIC_NAMES[flavor];
    this.registry.setDefaultLabels({ ...labels });
    const gauge = (name: string, help: string, read: () => number): void => {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          this.set(read());
        },
      });
    };
    const counter = (name: string, help: string, read: () => number): void =>
      scrapedCounter(registers, name, help, read);
    const usage = () => (engine.pool.capacity === 0 ? 0 : engine.pool.referenced / engine.pool.capacity);
    gauge(names.running, 'Number of requests in model execution batches.', () => engine.state().running);
    gauge(names.waiting, 'Number of requests waiting to be processed.', () => engine.state().waiting);
    gauge(names.usage, 'KV-cache usage. 1 means 100 percent usage.', usage);
    counter(names.promptTokens, 'Number of prefill tokens processed.', () => engine.counters.promptTokens);
    counter(names.generationTokens, 'Number of generation tokens processed.', () => realtime.counters.generationTokens);
    counter(
      'kvroute_sim_evicted_blocks_total',
      "Cached prefix blocks evicted to make room (the simulator's own; no engine exports such a counter).",
      () => engine.pool.evictions,
    );
    if (flavor === 'vllm') {
      counter(
        'vllm:prefix_cache_queries_total',
        'Prefix cache queries, in terms of number of queried tokens.',
        () => engine.counters.prefixQueries,
      );
      counter(
        'vllm:prefix_cache_hits_total',
        'Prefix cache hits, in terms of number of cached tokens.',
        () => engine.counters.prefixHits,
      );
      counter(
        'vllm:num_preemptions_total',
        'Cumulative number of preemption from the engine.',
        () => engine.counters.preemptions,
      );
      const success = new Counter({
        name: 'vllm:request_success_total',
        help: 'Count of successfully processed requests.',
        labelNames: ['finished_reason'],
        registers,
      });
      // vLLM exports every finished_reason from the start; the simulated engine only ever ends on "length".
      for (const reason of ['stop', 'length', 'abort']) success.inc({ finished_reason: reason }, 0);
      this.finishedCounter = { inc: () => success.inc({ finished_reason: 'length' }) };
    } else {
      const blockTokens = engine.blockSize;
      gauge('sglang:cache_hit_rate', 'The prefix cache hit rate.', () =>
        engine.counters.prefixQueries === 0 ? 0 : engine.counters.prefixHits / engine.counters.prefixQueries,
      );
      gauge('sglang:num_used_tokens', 'The number of used tokens.', () => engine.pool.referenced * blockTokens);
      gauge(
        'sglang:max_total_num_tokens',
        'Maximum total number of tokens in the KV cache pool.',
        () => engine.pool.capacity * blockTokens,
      );
      counter('sglang:cached_tokens_total', 'Number of cached prompt tokens.', () => engine.counters.prefixHits);
      const requests = new Counter({
        name: 'sglang:num_requests_total',
        help: 'Number of requests processed.',
        registers,
      });
      this.finishedCounter = requests;
    }
    this.ttft = new Histogram({
      name: names.ttft,
      help: 'Histogram of time to first token in seconds.',
      buckets: TTFT_BUCKETS,
      registers,
    });
    this.itl = new Histogram({
      name: names.interToken,
      help: 'Histogram of inter-token latency in seconds.',
      buckets: ITL_BUCKETS,
      registers,
    });
    this.e2e = new Histogram({
      name: names.e2e,
      help: 'Histogram of e2e request latency in seconds.',
      buckets: E2E_BUCKETS,
      registers,
    });
  }

  firstToken(seconds: number): void {
    this.ttft.observe(seconds);
  }

  interToken(seconds: number): void {
    this.itl.observe(seconds);
  }

  /** A request that reached its output length ("length": the simulated engine has no EOS). */
  finished(e2eSeconds: number): void {
    this.e2e.observe(e2eSeconds);
    this.finishedCounter.inc();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
