/**
 * Decode time per token from an engine's `/metrics` histograms, for the learned costs
 * (src/core/cost-learning/, docs/policies.md "Learned costs"): between two scrapes, the delta of
 * engine's inter-token latency histogram (vLLM's `vllm:inter_token_latency_seconds`, or the older
 * `vllm:time_per_output_token_seconds`; SGLang's `sglang:inter_token_latency_seconds`) gives the
 * mean seconds per output token over the interval, at about the running count of the scrapes. A CostLearner takes it with
 * `observeDecode(instance, secondsPerToken, batch)`.
 *
 * Invariants: sums and counts add over label sets (several engines behind one endpoint count as
 * one); a count that fell (the engine restarted) or did not grow gives no sample.
 * Prefill histograms (`vllm:request_prefill_time_seconds`) are not read: their mean over an
 * interval mixes prompts of every length, and the prefill model is not linear in the length (the
 * attention term), so a mean would bias the per-token cost; first tokens seen by the router carry
 * each request's own length instead.
 */
import { sumSamples, type MetricSample } from './engine-metrics-scrape.js';

/** The histogram sums and counts and the running gauge one scrape holds (NaN when absent). */
export interface DecodeTimeCounters {
  sumSeconds: number;
  count: number;
  running: number;
}

/** One interval's mean decode time per token, and the batch it ran at. */
export interface DecodeTimeSample {
  secondsPerToken: number;
  batch: number;
}

/** Each engine's histogram and the running gauge that goes with it, in the order they are tried. */
const HISTOGRAMS = [
  ['vllm:inter_token_latency_seconds', 'vllm:num_requests_running'],
  ['vllm:time_per_output_token_seconds', 'vllm:num_requests_running'],
  ['sglang:inter_token_latency_seconds', 'sglang:num_running_reqs'],
] as const;

/** Reads the counters from one scrape's samples (parseExposition). */
export function decodeTimeCounters(samples: readonly MetricSample[]): DecodeTimeCounters {
  const sum = (name: string): number => sumSamples(samples, name) ?? NaN;
  for (const [histogram, running] of HISTOGRAMS) {
    const count = sum(`${histogram}_count`);
    if (!Number.isNaN(count)) return { sumSeconds: sum(`${histogram}_sum`), count, running: sum(running) };
  }
  return { sumSeconds: NaN, count: NaN, running: sum('vllm:num_requests_running') };
}

/** The interval's sample; undefined when the histogram is absent, reset, or saw no token. */
export function decodeTimeSample(
  previous: DecodeTimeCounters,
  current: DecodeTimeCounters,
): DecodeTimeSample | undefined {
  const tokens = current.count - previous.count;
  const seconds = current.sumSeconds - previous.sumSeconds;
  if (!(tokens > 0 && seconds > 0)) return undefined;
  const running = [previous.running, current.running].filter((r) => Number.isFinite(r) && r > 0);
  const batch = running.length === 0 ? 1 : Math.max(1, running.reduce((a, b) => a + b, 0) / running.length);
  return { secondsPerToken: seconds / tokens, batch };
}
