/**
 * Engine presets: the timing and memory of one vLLM V1 engine, fitted to measurements.
 *
 * `h20-qwen3-coder-30b-a3b` is fitted to the B2 microbenchmark analysis (docs/glossary.md; one H20, TP 1,
 * chunked prefill at 8,192 tokens). A scheduler step costs
 *   prefill: stepOverheadMs + Σ over chunks (prefillMsPerToken × n + attentionMsPerToken2 × n × (s + n/2))
 *   decode:  decodeBaseMs + decodeMsPerSeq × batch + decodeMsPerContextToken × Σ context
 * for a chunk of n new tokens after s tokens already in the sequence (each new token attends to
 * all earlier ones: the quadratic term). Solving the four isolated-prefill points (139 / 589 /
 * 1,544 / 4,575 ms at 2k / 8k / 16k / 32k) gives the three prefill constants, all four within
 * 1%. Extrapolated, a 65k prefill takes 15 s, where the B2 text says "~10 s"; the model
 * keeps the quadratic (attention FLOPs are quadratic) rather than fit one rough figure.
 * TPOT 6.0 ms at batch 1 and 9.3 ms at batch 8 (short contexts) give the decode pair. A decode
 * step also reads every decoding sequence's KV cache once: context tokens × KV bytes per token at
 * the card's HBM bandwidth (H20: 4.0 TB/s), which the short-context microbench does not see but
 * a 100k-token agentic context does (~2.5 ms per sequence per step).
 *
 * Perturbing the model (scalePreset, docs/engine-model.md#perturbing-the-model): a result is
 * checked for robustness to this calibration by scaling a preset with three multipliers,
 * each finite, > 0 and ≤ MAX_ENGINE_SCALE, default 1:
 *   prefillCost X  stepOverheadMs, prefillMsPerToken and attentionMsPerToken2 × X. The step
 *                  overhead is the intercept of the isolated-prefill fit and is charged only on
 *                  steps that prefill, so it is prefill cost: every isolated prefill takes X times
 *                  as long, short or long.
 *   decodeCost Y   decodeBaseMs and decodeMsPerSeq × Y, hbmBytesPerSecond ÷ Y (the KV read per
 *                  context token × Y): every decode-only step takes Y times as long.
 *   kvCapacity Z   kvCacheBytes × Z: capacityBlocks is floor(Z × bytes ÷ block bytes).
 * A step that prefills and decodes costs X × its prefill part + Y × its decode part. The batch
 * limits (maxBatchedTokens, maxRunning) and maxModelLen are untouched. O(1).
 */
import { invalidValue } from '../core/errors.js';
import { MODEL_PRESETS, kvBytesPerToken } from '../trace/model-presets.js';

export interface EnginePreset {
  name: string;
  /** MODEL_PRESETS key: the KV bytes per token. */
  model: string;
  stepOverheadMs: number;
  prefillMsPerToken: number;
  attentionMsPerToken2: number;
  decodeBaseMs: number;
  decodeMsPerSeq: number;
  /** HBM bandwidth, bytes per second: a decode step reads each sequence's KV once. */
  hbmBytesPerSecond: number;
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
    decodeBaseMs: 5.529,
    decodeMsPerSeq: 0.4714,
    hbmBytesPerSecond: 4.0e12,
    maxBatchedTokens: 8192,
    maxRunning: 256,
    maxModelLen: 262_144,
    // 96 GiB at vLLM's default gpu_memory_utilization 0.9, minus 30.5 B bf16 parameters.
    kvCacheBytes: 96 * GIB * 0.9 - 30.5e9 * 2,
  },
};

export const DEFAULT_ENGINE_PRESET = 'h20-qwen3-coder-30b-a3b';

/** Multipliers of an engine model's costs and capacity (see the header); each defaults to 1. */
export interface EngineScaling {
  /** Prefill step time: overhead, per-token and attention terms. */
  prefillCost?: number;
  /** Decode step time: base, per-sequence and KV-read terms. */
  decodeCost?: number;
  /** KV cache bytes, so capacity in blocks. */
  kvCapacity?: number;
}

/** The largest multiplier accepted: beyond it a run is not a perturbation of this model. */
export const MAX_ENGINE_SCALE = 100;

/**
 * `scaling` with every factor filled in (1 when absent). A factor that is not a finite number
 * in (0, MAX_ENGINE_SCALE] throws a RangeError naming it (ERR_KVROUTE_INVALID_ARG_VALUE).
 */
export function engineScaling(scaling: EngineScaling = {}): Required<EngineScaling> {
  const resolved = {
    prefillCost: scaling.prefillCost ?? 1,
    decodeCost: scaling.decodeCost ?? 1,
    kvCapacity: scaling.kvCapacity ?? 1,
  };
  for (const [name, value] of Object.entries(resolved))
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_ENGINE_SCALE)
      throw invalidValue(`scaling.${name}`, `a finite number > 0 and ≤ ${MAX_ENGINE_SCALE}`, value);
  return resolved;
}

/** True when `scaling` changes nothing. */
export function isUnscaled(scaling: EngineScaling = {}): boolean {
  const s = engineScaling(scaling);
  return s.prefillCost === 1 && s.decodeCost === 1 && s.kvCapacity === 1;
}

/** "prefill cost ×1.3 · KV capacity ×0.5": the factors other than 1, or "unscaled". Checks nothing. */
export function describeScaling(scaling: EngineScaling = {}): string {
  const parts: string[] = [];
  if ((scaling.prefillCost ?? 1) !== 1) parts.push(`prefill cost ×${scaling.prefillCost}`);
  if ((scaling.decodeCost ?? 1) !== 1) parts.push(`decode cost ×${scaling.decodeCost}`);
  if ((scaling.kvCapacity ?? 1) !== 1) parts.push(`KV capacity ×${scaling.kvCapacity}`);
  return parts.length === 0 ? 'unscaled' : parts.join(' · ');
}

/**
 * `preset` with its prefill cost, decode cost and KV capacity scaled (see the header): a new
 * preset, named after the original and the factors; `preset` itself when nothing changes.
 */
export function scalePreset(preset: EnginePreset, scaling: EngineScaling = {}): EnginePreset {
  const { prefillCost, decodeCost, kvCapacity } = engineScaling(scaling);
  if (prefillCost === 1 && decodeCost === 1 && kvCapacity === 1) return preset;
  return {
    ...preset,
    name: `${preset.name} (${describeScaling(scaling)})`,
    stepOverheadMs: preset.stepOverheadMs * prefillCost,
    prefillMsPerToken: preset.prefillMsPerToken * prefillCost,
    attentionMsPerToken2: preset.attentionMsPerToken2 * prefillCost,
    decodeBaseMs: preset.decodeBaseMs * decodeCost,
    decodeMsPerSeq: preset.decodeMsPerSeq * decodeCost,
    hbmBytesPerSecond: preset.hbmBytesPerSecond / decodeCost,
    kvCacheBytes: preset.kvCacheBytes * kvCapacity,
  };
}

/** KV cache capacity in blocks of `blockSize` tokens. */
export function capacityBlocks(preset: EnginePreset, blockSize: number): number {
  return Math.floor(preset.kvCacheBytes / (kvBytesPerTokenOf(preset) * blockSize));
}

/** One prefill chunk of a step: `tokens` new tokens after `context` already computed. */
export interface PrefillChunk {
  tokens: number;
  context: number;
}

/**
 * Duration in ms of one scheduler step: prefill `chunks`, and `decodes` sequences holding
 * `decodeContext` tokens of KV between them.
 */
export function stepMs(
  preset: EnginePreset,
  chunks: readonly PrefillChunk[],
  decodes: number,
  decodeContext = 0,
): number {
  let ms = 0;
  if (chunks.length > 0) {
    ms += preset.stepOverheadMs;
    for (const { tokens, context } of chunks)
      ms += preset.prefillMsPerToken * tokens + preset.attentionMsPerToken2 * tokens * (context + tokens / 2);
  }
  if (decodes > 0)
    ms += preset.decodeBaseMs + preset.decodeMsPerSeq * decodes + decodeContext * decodeMsPerContextToken(preset);
  return ms;
}

/**
 * A lower bound, in ms, on `steps` consecutive decode-only steps of `batch` sequences holding
 * `context` tokens at the first (each step adds `batch`): the closed form of the sum of stepMs,
 * less a rounding margin, so it never exceeds the step-by-step sum.
 */
export function decodeStepsMsAtLeast(preset: EnginePreset, batch: number, context: number, steps: number): number {
  const perStep = preset.decodeBaseMs + preset.decodeMsPerSeq * batch;
  const contextTokens = steps * context + (batch * steps * (steps - 1)) / 2;
  const exact = steps * perStep + contextTokens * decodeMsPerContextToken(preset);
  return exact * (1 - 1e-9);
}

const contextCost = new WeakMap<EnginePreset, number>();

/** ms a decode step spends per token of KV it reads: KV bytes per token at HBM bandwidth. */
function decodeMsPerContextToken(preset: EnginePreset): number {
  let ms = contextCost.get(preset);
  if (ms === undefined) {
    ms = (kvBytesPerTokenOf(preset) * 1000) / preset.hbmBytesPerSecond;
    contextCost.set(preset, ms);
  }
  return ms;
}

function kvBytesPerTokenOf(preset: EnginePreset): number {
  const model = MODEL_PRESETS[preset.model];
  if (model === undefined) throw new Error(`engine preset ${preset.name} names unknown model ${preset.model}`);
  return kvBytesPerToken(model);
}
