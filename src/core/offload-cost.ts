/**
 * The prefill-offload cost model (issue #18, fitted to the B2 microbenchmark, docs/glossary.md): what a
 * prefill costs the decodes it lands beside, and what shipping its KV from a prefill instance
 * to the decode instance costs instead. One model, read by the routing core's `offload` layer
 * (native/core/offload.h is its C++ twin), by the simulator's P→D transfer and by `kvroute sim
 * serve`'s disaggregated-prefill protocol, so a decision and the time it is charged agree.
 *
 *   prefillMs(n, c)   = ceil(n / chunkTokens) × stepOverheadMs + prefillMsPerToken × n
 *                       + attentionMsPerToken2 × n × (c + n / 2)
 *     n uncached tokens after c cached ones, chunked as vLLM's scheduler does: the engine
 *     model's isolated prefill (src/sim/engine-preset.ts stepMs), summed over the chunks (the
 *     attention term sums exactly to n × (c + n/2) however n is chunked).
 *   interferenceMs    = prefillMs(n, c) × decodeBatch
 *     the decode time lost: every decoding request on the target stalls for the prefill's
 *     steps (B2: TPOT p90 during a prefill ≈ the prefill's chunk time).
 *   transferMs(n)     = wireMs + warmOverheadMs (+ coldPenaltyMs on a pair's first use)
 *     wireMs = n × kvBytesPerToken × 8 / (linkGbps × 1e9) × 1000, or that ÷ layers with
 *     layer-wise transfer (each layer ships while the next computes: only the last is exposed).
 *   offload wins iff interferenceMs > transferMs.
 *   chargePrefill (opt-in): extraPrefillMs = ownMs(P) − prefillMs(n, c), where ownMs(P) =
 *     prefillMs(P's uncached, P's cached) + prefillMs(P's pending prefill, 0), the latency the
 *     offloaded request pays over co-located serving; offload wins iff interferenceMs >
 *     transferMs + max(0, extraPrefillMs).
 *
 * Defaults: the H20 / Qwen3-Coder-30B-A3B engine preset's prefill timing; 98,304 KV bytes per
 * token and 48 layers (the model preset); a 25 Gbps link; 35 ms warm overhead (B2's
 * measured PD-sep overhead, ~33–36 ms); a cold pair costs 5× the warm overhead in all (B2:
 * "cold connection penalty 3–10×", "5× penalty"), so coldPenaltyMs = 4 × 35 = 140;
 * threshold 1,000 uncached tokens (B2's decision rule). O(1) per call.
 */
import { invalidValue } from './errors.js';

export interface OffloadCostModel {
  /** The layer applies only when the request's uncached prefill exceeds this many tokens. */
  thresholdTokens: number;
  /** P→D link bandwidth, gigabits per second. */
  linkGbps: number;
  /** Fixed cost of a transfer over a warm prefill→decode connection, ms. */
  warmOverheadMs: number;
  /** Added to the first transfer of a prefill→decode pair, ms. */
  coldPenaltyMs: number;
  /** Layer-wise transfer: only the last layer's KV is exposed. */
  layerwise: boolean;
  /** The model's layers (layer-wise transfer exposes 1 / layers of the wire time). */
  layers: number;
  /** KV cache bytes per token (2 × layers × kv_heads × head_dim × dtype bytes). */
  kvBytesPerToken: number;
  /** The engine's prefill timing (src/sim/engine-preset.ts). */
  stepOverheadMs: number;
  prefillMsPerToken: number;
  attentionMsPerToken2: number;
  /** vLLM's max_num_batched_tokens: tokens per prefill chunk. */
  chunkTokens: number;
  /**
   * Charge the offloaded request its own prefill on P (docs/policies.md "The offload layer"):
   * P is the decode-free candidate whose queued prefill plus the request's uncached part
   * finishes first, and offload needs interference > transfer + max(0, extraPrefillMs).
   */
  chargePrefill: boolean;
}

export const DEFAULT_OFFLOAD_COST: Readonly<OffloadCostModel> = Object.freeze({
  thresholdTokens: 1000,
  linkGbps: 25,
  warmOverheadMs: 35,
  coldPenaltyMs: 140,
  layerwise: false,
  layers: 48,
  kvBytesPerToken: 98_304,
  stepOverheadMs: 35.0,
  prefillMsPerToken: 0.04518,
  attentionMsPerToken2: 5.48e-6,
  chunkTokens: 8192,
  chargePrefill: false,
});

/** Time in ms to prefill `uncached` tokens after `cached` ones, alone on an engine. */
export function prefillMs(model: OffloadCostModel, uncached: number, cached: number): number {
  if (uncached <= 0) return 0;
  const chunks = Math.ceil(uncached / model.chunkTokens);
  return (
    chunks * model.stepOverheadMs +
    model.prefillMsPerToken * uncached +
    model.attentionMsPerToken2 * uncached * (cached + uncached / 2)
  );
}

/** Decode time lost, in ms summed over the target's `decodeBatch` decoding requests. */
export function interferenceMs(model: OffloadCostModel, uncached: number, cached: number, decodeBatch: number): number {
  return decodeBatch > 0 ? prefillMs(model, uncached, cached) * decodeBatch : 0;
}

/** Time in ms on the wire for `tokens` tokens of KV (layer-wise: the last layer's share). */
export function wireMs(model: OffloadCostModel, tokens: number): number {
  const ms = (tokens * model.kvBytesPerToken * 8) / (model.linkGbps * 1e6);
  return model.layerwise ? ms / model.layers : ms;
}

/** Time in ms to move `tokens` tokens of KV from the prefill to the decode instance. */
export function transferMs(model: OffloadCostModel, tokens: number, coldPair: boolean): number {
  return wireMs(model, tokens) + model.warmOverheadMs + (coldPair ? model.coldPenaltyMs : 0);
}

/**
 * Checks a partial cost model as a user gives it (`field` names it in errors) and fills the
 * rest from `base`.
 */
export function resolveOffloadCost(
  field: string,
  given: Partial<OffloadCostModel> | undefined,
  base: Readonly<OffloadCostModel> = DEFAULT_OFFLOAD_COST,
): OffloadCostModel {
  const model: OffloadCostModel = { ...base, ...given };
  const positive: Array<keyof OffloadCostModel> = ['linkGbps', 'layers', 'kvBytesPerToken', 'chunkTokens'];
  for (const key of Object.keys(model) as Array<keyof OffloadCostModel>) {
    const value = model[key];
    if (key === 'layerwise' || key === 'chargePrefill') {
      if (typeof value !== 'boolean') throw invalidValue(`${field}.${key}`, 'true or false', value);
      continue;
    }
    if (!(key in base)) throw invalidValue(`${field}.${key}`, 'absent (not an offload cost field)', value);
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0)
      throw invalidValue(`${field}.${key}`, 'a finite number ≥ 0', value);
    if (positive.includes(key) && value <= 0) throw invalidValue(`${field}.${key}`, '> 0', value);
  }
  return model;
}
