/**
 * Reconciles a Router's shadow counters with its engines' Prometheus `/metrics`, every 30 s by
 * default, as the reference experiments' proxy did.
 *
 * Each round scrapes every engine (vLLM's or SGLang's request gauges, engine-metrics-scrape.ts)
 * and hands its running + waiting to `router.reconcile()`, which releases open tickets the engine
 * no longer has once the excess has persisted across two rounds (the rule and why are in
 * Router.reconcile). An engine that does not answer is skipped for the round and reported; the
 * reconciler keeps going. Each result also carries the engine's own prefix-cache hit ratio,
 * which `kvroute serve` exports as `kvroute_engine_prefix_cache_hit_ratio`, and, from the second
 * round an engine answers, its decode time per token since the previous one (the deltas of its
 * inter-token latency histogram, decode-time-samples.ts), which serve feeds to its learned costs.
 * Rounds never overlap: the next starts `intervalMs` after one ends.
 */
import { rangeError } from '../core/errors.js';
import type { Router } from '../core/router.js';
import {
  decodeTimeCounters,
  decodeTimeSample,
  type DecodeTimeCounters,
  type DecodeTimeSample,
} from './decode-time-samples.js';
import { scrapeEngine } from './engine-metrics-scrape.js';

export const DEFAULT_RECONCILE_MS = 30_000;
const DEFAULT_TIMEOUT_MS = 5_000;

export interface ReconcilerOptions {
  /** The router whose counters are reconciled. */
  router: Router;
  /** Router instance id → the engine's base URL (its `/metrics` is scraped). Default: each id is its URL. */
  engines?: ReadonlyArray<{ instance: string; url: string }>;
  /** ms between rounds (default 30,000). */
  intervalMs?: number;
  /** ms one scrape may take (default 5,000). */
  timeoutMs?: number;
  /** Hears every round's outcome, one entry per engine. */
  onRound?: (results: readonly ReconcileResult[]) => void;
}

export interface ReconcileResult {
  instance: string;
  /** The engine's running + waiting; undefined when it did not answer. */
  engineRequests?: number;
  /** Tickets released this round. */
  released: number;
  /** Why the engine was skipped, when it was. */
  error?: string;
  /** The engine's own prefix-cache hit ratio (engine-metrics-scrape.ts), when it exports one. */
  prefixCacheHitRatio?: number;
  /**
   * The engine's mean decode time per token since its previous round (decode-time-samples.ts),
   * when its inter-token latency histogram grew: a CostLearner's observeDecode sample.
   */
  decode?: DecodeTimeSample;
}

export class ShadowReconciler {
  private readonly router: Router;
  private readonly engines?: ReadonlyArray<{ instance: string; url: string }>;
  private readonly intervalMs: number;
  private readonly timeoutMs: number;
  private readonly onRound?: (results: readonly ReconcileResult[]) => void;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> | undefined;
  private stopped = true;
  /** Each engine's decode histogram at its last answered round (decode samples are their deltas). */
  private readonly decodeCounters = new Map<string, DecodeTimeCounters>();

  constructor(options: ReconcilerOptions) {
    this.router = options.router;
    this.engines = options.engines;
    this.intervalMs = positive('intervalMs', options.intervalMs ?? DEFAULT_RECONCILE_MS);
    this.timeoutMs = positive('timeoutMs', options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
    this.onRound = options.onRound;
  }

  /** Starts the rounds; the first runs one interval from now. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule();
  }

  /** Stops; resolves once a round in progress has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  /** One round now: scrape every engine, reconcile each that answered. */
  async reconcileOnce(): Promise<ReconcileResult[]> {
    const engines = this.engines ?? this.router.instances().map((instance) => ({ instance, url: instance }));
    const results = await Promise.all(
      engines.map(async ({ instance, url }): Promise<ReconcileResult> => {
        const scrape = await scrapeEngine(url, this.timeoutMs);
        if (typeof scrape === 'string') return { instance, released: 0, error: scrape };
        const engineRequests = scrape.counts.running + scrape.counts.waiting;
        const ratio = scrape.prefixCacheHitRatio;
        const result: ReconcileResult = { instance, engineRequests, released: 0 };
        if (ratio !== undefined) result.prefixCacheHitRatio = ratio;
        const counters = decodeTimeCounters(scrape.samples);
        const previous = this.decodeCounters.get(instance);
        this.decodeCounters.set(instance, counters);
        const decode = previous === undefined ? undefined : decodeTimeSample(previous, counters);
        if (decode !== undefined) result.decode = decode;
        // The instance may have been removed while the scrape was out.
        if (this.router.instances().includes(instance))
          result.released = this.router.reconcile(instance, engineRequests);
        return result;
      }),
    );
    this.onRound?.(results);
    return results;
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.running = this.reconcileOnce().finally(() => {
        this.running = undefined;
        if (!this.stopped) this.schedule();
      });
    }, this.intervalMs);
    this.timer.unref();
  }
}

function positive(name: string, value: number): number {
  if (!(typeof value === 'number' && Number.isFinite(value) && value > 0))
    throw rangeError(
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      `options.${name} must be a positive number of ms, got ${String(value)}`,
    );
  return value;
}
