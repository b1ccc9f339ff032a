/**
 * How well the router predicted the engine's cached tokens, from records that carry both the
 * router's prediction (`predicted_cached_tokens`) and the engine's report (`cached_tokens`).
 * Definitions (docs/analysis.md#prediction), over the successful requests with a prediction:
 * - exact: predicted = cached;
 * - error = predicted − cached; MAE = mean |error| in tokens;
 * - over-predicted: error > 0 (the router expected cache the engine did not have); its tokens are
 *   Σ error over them. Under-predicted: error < 0; its tokens are Σ −error;
 * - lost APC = over-predicted tokens ÷ Σ input_tokens: the share of prompt tokens the router
 *   counted as cached on its chosen instance that the engine computed afresh;
 * - unpredicted APC = under-predicted tokens ÷ Σ input_tokens: the share served from cache that
 *   the router did not expect;
 * - predicted APC − lost APC + unpredicted APC = actual APC, exactly (over the same requests).
 * For an offloaded request (docs/offload.md) the engine's figure is `decode_cached_tokens`, the
 * decode instance's own cache hit: the prediction is about that instance (the decision's), not
 * about the prefill instance whose hit `cached_tokens` holds.
 * Failed requests and records without a prediction (null, or absent in older files) count in
 * `without_prediction` and nowhere else; null when no successful request carries one.
 */
import type { RequestRecord } from '../trace/records.js';
import { isFailed } from './run-metrics.js';

export interface PredictionSplit {
  requests: number;
  tokens: number;
}

export interface PredictionAccuracy {
  /** Successful requests carrying a prediction: every figure below is over these. */
  requests: number;
  /** Successful requests without one (a target that sends no x-kvroute-predicted-cached-tokens). */
  without_prediction: number;
  exact: number;
  exact_fraction: number;
  mae_tokens: number;
  over: PredictionSplit;
  under: PredictionSplit;
  input_tokens: number;
  predicted_apc: number;
  actual_apc: number;
  lost_apc: number;
  unpredicted_apc: number;
}

export function predictionAccuracy(records: readonly RequestRecord[]): PredictionAccuracy | null {
  let requests = 0;
  let without = 0;
  let exact = 0;
  let absError = 0;
  let overRequests = 0;
  let overTokens = 0;
  let underRequests = 0;
  let underTokens = 0;
  let input = 0;
  let predictedSum = 0;
  let cachedSum = 0;
  for (const r of records) {
    if (isFailed(r)) continue;
    const predicted = r.predicted_cached_tokens;
    if (predicted === undefined || predicted === null) {
      without++;
      continue;
    }
    requests++;
    const cached = r.decode_cached_tokens ?? r.cached_tokens;
    input += r.input_tokens;
    predictedSum += predicted;
    cachedSum += cached;
    const error = predicted - cached;
    if (error === 0) exact++;
    else if (error > 0) {
      overRequests++;
      overTokens += error;
    } else {
      underRequests++;
      underTokens -= error;
    }
    absError += Math.abs(error);
  }
  if (requests === 0) return null;
  const share = (tokens: number): number => (input === 0 ? 0 : tokens / input);
  return {
    requests,
    without_prediction: without,
    exact,
    exact_fraction: exact / requests,
    mae_tokens: absError / requests,
    over: { requests: overRequests, tokens: overTokens },
    under: { requests: underRequests, tokens: underTokens },
    input_tokens: input,
    predicted_apc: share(predictedSum),
    actual_apc: share(cachedSum),
    lost_apc: share(overTokens),
    unpredicted_apc: share(underTokens),
  };
}
