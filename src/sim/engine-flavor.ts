/**
 * Which engine a simulated engine speaks as: vLLM (the default) or SGLang (`sim serve --flavor
 * sglang`). The model underneath is the same; what differs is what a router sees of it
 * (docs/sim-serve.md "SGLang flavour", checked against SGLang's source):
 *
 * - Prometheus names and labels (python/sglang/srt/metrics/collector.py): `sglang:num_running_reqs`,
 *   `sglang:num_queue_reqs`, `sglang:token_usage`, `sglang:cache_hit_rate`, the token counters and
 *   the latency histograms, labelled `model_name`, `engine_type`, `tp_rank`, `pp_rank`.
 * - KV events (python/sglang/srt/disaggregation/kv_events.py and mem_cache's KV event mixin): one
 *   `BlockStored` or `BlockRemoved` per page (kv-event-encoding.ts, encoding `sglang`), hashes as
 *   signed int64.
 * - Routes (python/sglang/srt/entrypoints/http_server.py): `/health` and `/health_generate`,
 *   `/get_model_info`, `POST /flush_cache` (its prefix-cache reset), and `/v1/models` owned by
 *   `sglang`.
 * - Error bodies (SGLang's OpenAI layer): the error object at the top level,
 *   `{"object": "error", "message", "type", "param", "code"}`; vLLM nests it under `error`.
 */
export type EngineFlavor = 'vllm' | 'sglang';
export const ENGINE_FLAVORS: readonly EngineFlavor[] = ['vllm', 'sglang'];

/** The Prometheus names both engines export, each in its own spelling. */
export interface SharedMetricNames {
  running: string;
  waiting: string;
  /** KV usage, a fraction 0–1. */
  usage: string;
  promptTokens: string;
  generationTokens: string;
  ttft: string;
  interToken: string;
  e2e: string;
}

export const METRIC_NAMES: Record<EngineFlavor, SharedMetricNames> = {
  vllm: {
    running: 'vllm:num_requests_running',
    waiting: 'vllm:num_requests_waiting',
    usage: 'vllm:kv_cache_usage_perc',
    promptTokens: 'vllm:prompt_tokens_total',
    generationTokens: 'vllm:generation_tokens_total',
    ttft: 'vllm:time_to_first_token_seconds',
    interToken: 'vllm:inter_token_latency_seconds',
    e2e: 'vllm:e2e_request_latency_seconds',
  },
  sglang: {
    running: 'sglang:num_running_reqs',
    waiting: 'sglang:num_queue_reqs',
    usage: 'sglang:token_usage',
    promptTokens: 'sglang:prompt_tokens_total',
    generationTokens: 'sglang:generation_tokens_total',
    ttft: 'sglang:time_to_first_token_seconds',
    interToken: 'sglang:inter_token_latency_seconds',
    e2e: 'sglang:e2e_request_latency_seconds',
  },
};

/** The default labels of an engine's metrics: vLLM's `engine` index, SGLang's scheduler labels. */
export function metricLabels(flavor: EngineFlavor, model: string, index: number): Record<string, string> {
  return flavor === 'vllm'
    ? { model_name: model, engine: String(index) }
    : { model_name: model, engine_type: 'unified', tp_rank: '0', pp_rank: '0' };
}

/** The engine's error body for an HTTP status (see the header). */
export function flavorErrorBody(flavor: EngineFlavor, status: number, type: string, message: string): object {
  return flavor === 'vllm'
    ? { error: { message, type, param: null, code: status } }
    : { object: 'error', message, type, param: null, code: status };
}
