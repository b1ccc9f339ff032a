/**
 * Engine presets: the timing and memory of one vLLM V1 engine, fitted to measurements.
 *
 * `h20-qwen3-coder-30b-a3b` is fitted to ../shared/seeds/microbench_ANALYSIS.md (one H20, TP 1,
 * chunked prefill at 8,192 tokens). A scheduler step costs
 *   prefill: stepOverheadMs + Σ over chunks (prefillMsPerToken × n + attentionMsPerToken2 × n × (s + n/2))
 *   decode:  decodeBaseMs + decodeMsPerSeq × batch
 * for a chunk of n new tokens after s tokens already in the sequence (each new token attends to
 * all earlier ones: the quadratic term), with the chunk's mean context s + n/2 capped at
 * `attentionContextCap`. Solving the four isolated-prefill points (139 / 589 / 1,544 / 4,575 ms
 * at 2k / 8k / 16k / 32k) gives the three prefill constants. Uncapped, the quadratic term puts a
 * 65k prefill at 15 s, where the seeds' B2 run saw about 10 s (window_1_results.md); the cap at
 * 24k tokens of context gives 10.2 s there and keeps the four microbench points within 6%.
 * TPOT 6.0 ms at batch 1 and 9.3 ms at batch 8 give the decode pair.
 */
import { MODEL_PRESETS, kvBytesPerToken } from '../trace/model-presets.js';

export interface EnginePreset {
  name: string;
  /** MODEL_PRESETS key: the KV bytes per token. */
  model: string;
  stepOverheadMs: number;
  prefillMsPerToken: number;
  attentionMsPerToken2: number;
  /** Mean context beyond which a chunk's attention cost per token stops growing (tokens). */
  attentionContextCap: number;
  decodeBaseMs: number;
  decodeMsPerSeq: number;
  /** vLLM's max_num_batched_tokens. */
  maxBatchedTokens: number;
  /** vLLM's max_num_seqs. */
  maxRunning: number;
  /** vLLM's max_model_len. */
  maxModelLen: number;
  /** HBM for the KV cache: card × gpu_memory_utilization − weights. */
  kvCacheBytes: number;
}

const GIB = 2 ** 30;

export const ENGINE_PRESETS: Readonly<Record<string, EnginePreset>> = {
  'h20-qwen3-coder-30b-a3b': {
    name: 'H20 96 GiB, Qwen3-Coder-30B-A3B-Instruct bf16, TP 1',
    model: 'qwen3-coder-30b-a3b',
    stepOverheadMs: 35.0,
    prefillMsPerToken: 0.04518,
    attentionMsPerToken2: 5.48e-6,
    attentionContextCap: 24_576,
    decodeBaseMs: 5.529,
    decodeMsPerSeq: 0.4714,
    maxBatchedTokens: 8192,
    maxRunning: 256,
    maxModelLen: 262_144,
    // 96 GiB at vLLM's default gpu_memory_utilization 0.9, minus 30.5 B bf16 parameters.
    kvCacheBytes: 96 * GIB * 0.9 - 30.5e9 * 2,
  },
};

export const DEFAULT_ENGINE_PRESET = 'h20-qwen3-coder-30b-a3b';

/** KV cache capacity in blocks of `blockSize` tokens. */
export function capacityBlocks(preset: EnginePreset, blockSize: number): number {
  const model = MODEL_PRESETS[preset.model];
  if (model === undefined) throw new Error(`engine preset ${preset.name} names unknown model ${preset.model}`);
  return Math.floor(preset.kvCacheBytes / (kvBytesPerToken(model) * blockSize));
}

/** One prefill chunk of a step: `tokens` new tokens after `context` already computed. */
export interface PrefillChunk {
  tokens: number;
  context: number;
}

/** Duration in ms of one scheduler step. */
export function stepMs(preset: EnginePreset, chunks: readonly PrefillChunk[], decodes: number): number {
  let ms = 0;
  if (chunks.length > 0) {
    ms += preset.stepOverheadMs;
    for (const { tokens, context } of chunks)
      ms +=
        preset.prefillMsPerToken * tokens +
        preset.attentionMsPerToken2 * tokens * Math.min(context + tokens / 2, preset.attentionContextCap);
  }
  if (decodes > 0) ms += preset.decodeBaseMs + preset.decodeMsPerSeq * decodes;
  return ms;
}
