/**
 * Engine state from an engine's Prometheus `/metrics`: vLLM's names (`vllm:num_requests_running`,
 * `vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`, the prefix-cache counters) or SGLang's
 * (`sglang:num_running_reqs`, `sglang:num_queue_reqs`, `sglang:token_usage`, and for the prefix
 * cache `sglang:prompt_tokens_total` and `sglang:cached_tokens_total`; names from SGLang's
 * python/sglang/srt/metrics/collector.py).
 *
 * SGLang labels each scheduler's samples with its `tp_rank`: the ranks of one tensor-parallel group
 * run one scheduler state, so only `tp_rank="0"` (or no such label) is read, where summing would
 * count each request once per GPU. Data-parallel schedulers (`dp_rank`) are distinct and add up.
 *
 * Metrics carry no pending-prefill figures, so those publish as 0, and the decode batch is the
 * running count. KV usage comes as a fraction; it is published against KV_BLOCKS_SCALE blocks
 * unless vLLM's `vllm:cache_config_info` names `num_gpu_blocks`.
 *
 * The engine's own prefix-cache hit ratio comes with a scrape too (prefixCacheHitRatio): it covers
 * all of an engine's traffic, where the proxy's usage-based ratio sees only responses that carry
 * `usage` (streams only with `stream_options.include_usage`).
 */
import type { EngineCounts } from './shm-feed.js';

/** Blocks a usage fraction is published against when the engine does not say (0.01% steps). */
export const KV_BLOCKS_SCALE = 10_000;

/** One sample of the text exposition format: name, labels, value. */
export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * The samples of a Prometheus text exposition (version 0.0.4). Comments and lines that are not
 * samples are skipped; values parse as Prometheus writes them (`NaN`, `+Inf`, `-Inf` included).
 */
export function parseExposition(text: string): MetricSample[] {
  const samples: MetricSample[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (match === null) continue;
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[3] ?? '').matchAll(LABEL))
      labels[key!] = value!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    const text = match[4]!;
    const value = text === '+Inf' ? Infinity : text === '-Inf' ? -Infinity : Number(text);
    if (Number.isNaN(value) && text !== 'NaN') continue; // not a number: not a sample
    samples.push({ name: match[1]!, labels, value });
  }
  return samples;
}

/**
 * An engine's counts from its samples, summed over label sets (several engines behind one
 * endpoint count as one); undefined when the text has neither vLLM's nor SGLang's gauges.
 */
export function countsFromMetrics(samples: readonly MetricSample[]): EngineCounts | undefined {
  const sum = (name: string) => sumSamples(samples, name);
  const running = sum('vllm:num_requests_running') ?? sum('sglang:num_running_reqs');
  const waiting = sum('vllm:num_requests_waiting') ?? sum('sglang:num_queue_reqs');
  if (running === undefined && waiting === undefined) return undefined;
  const usage = sum('vllm:kv_cache_usage_perc') ?? sum('vllm:gpu_cache_usage_perc') ?? sum('sglang:token_usage') ?? 0;
  const declared = samples.find((s) => s.name === 'vllm:cache_config_info')?.labels.num_gpu_blocks;
  const totalBlocks = declared !== undefined && Number(declared) > 0 ? Math.round(Number(declared)) : KV_BLOCKS_SCALE;
  const count = (x: number | undefined) => Math.max(0, Math.round(x ?? 0));
  return {
    running: count(running),
    waiting: count(waiting),
    kvBlocksUsed: Math.min(totalBlocks, count(Math.min(1, Math.max(0, usage)) * totalBlocks)),
    kvBlocksTotal: totalBlocks,
    pendingPrefillTokens: 0,
    maxPrefillRemaining: 0,
    decodeBatch: count(running),
    prefixCacheQueries: count(sum('vllm:prefix_cache_queries_total') ?? sum('sglang:prompt_tokens_total')),
    prefixCacheHits: count(sum('vllm:prefix_cache_hits_total') ?? sum('sglang:cached_tokens_total')),
  };
}

/** A sample another rank of the same SGLang scheduler also reports (see the header). */
export function mirroredRank(sample: MetricSample): boolean {
  const rank = sample.labels.tp_rank;
  return rank !== undefined && rank !== '0' && sample.name.startsWith('sglang:');
}

/** The sum of a metric's finite samples over label sets, mirrored ranks left out; undefined if none. */
export function sumSamples(samples: readonly MetricSample[], name: string): number | undefined {
  let total: number | undefined;
  for (const s of samples)
    if (s.name === name && Number.isFinite(s.value) && !mirroredRank(s)) total = (total ?? 0) + s.value;
  return total;
}

/**
 * The engine's prefix-cache hit ratio since it started, 0–1: vLLM's
 * `prefix_cache_hits_total / prefix_cache_queries_total` (tokens), else SGLang's
 * `cached_tokens_total / prompt_tokens_total`, else its `sglang:cache_hit_rate` gauge (averaged over
 * label sets); undefined when it exports none of them or has answered no query yet.
 */
export function prefixCacheHitRatio(samples: readonly MetricSample[]): number | undefined {
  const ratio = (hits: number | undefined, queries: number | undefined): number | undefined =>
    queries !== undefined && queries > 0 ? Math.min(1, Math.max(0, (hits ?? 0) / queries)) : undefined;
  const vllm = ratio(
    sumSamples(samples, 'vllm:prefix_cache_hits_total'),
    sumSamples(samples, 'vllm:prefix_cache_queries_total'),
  );
  if (vllm !== undefined) return vllm;
  const sglang = ratio(
    sumSamples(samples, 'sglang:cached_tokens_total'),
    sumSamples(samples, 'sglang:prompt_tokens_total'),
  );
  if (sglang !== undefined) return sglang;
  const rates = samples.filter(
    (s) => s.name === 'sglang:cache_hit_rate' && Number.isFinite(s.value) && !mirroredRank(s),
  );
  if (rates.length === 0) return undefined;
  return Math.min(1, Math.max(0, rates.reduce((a, s) => a + s.value, 0) / rates.length));
}

/** What one scrape of an engine's `/metrics` gives. */
export interface EngineScrape {
  counts: EngineCounts;
  /** Every sample of the text, for readers of other metrics (decode-time-samples.ts). */
  samples: MetricSample[];
  /** prefixCacheHitRatio() of the same text. */
  prefixCacheHitRatio?: number;
}

/** GETs the engine's `/metrics` and reads it; a string says why there is nothing to read. */
export async function scrapeEngine(url: string, timeoutMs: number): Promise<EngineScrape | string> {
  try {
    const response = await fetch(new URL('/metrics', url), { signal: AbortSignal.timeout(timeoutMs) });
    if (!response.ok) return `GET /metrics answered ${response.status}`;
    const samples = parseExposition(await response.text());
    const counts = countsFromMetrics(samples);
    if (counts === undefined) return 'its /metrics has neither vLLM nor SGLang request gauges';
    const ratio = prefixCacheHitRatio(samples);
    return ratio === undefined ? { counts, samples } : { counts, samples, prefixCacheHitRatio: ratio };
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause?.code;
    return `GET /metrics failed: ${cause ?? (error as Error).name}`;
  }
}

/** GETs the engine's `/metrics` and reads its counts; a string says why there are none. */
export async function scrapeEngineCounts(url: string, timeoutMs: number): Promise<EngineCounts | string> {
  const scrape = await scrapeEngine(url, timeoutMs);
  return typeof scrape === 'string' ? scrape : scrape.counts;
}
