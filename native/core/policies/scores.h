// scores — the per-candidate scores of the cost-based policies (lower is
// better), the twins of the score functions in src/core/reference/engine-state.ts.
// Scores must be bit-identical to the TypeScript reference: the build turns
// off fused multiply-add (-ffp-contract=off), and the expressions keep its order.
#pragma once

#include "core/engine-state.h"
#include "core/policy.h"

namespace kvroute {

// LMetric: prefill_tokens x (batch_size + 1), lower is better, where
// prefill_tokens = queued prefill + this request's uncached tokens and
// batch_size = requests on the instance, decoding ones weighted by decodeWeight.
inline double lmetricScore(const EffectiveState& e, double uncachedTokens, double decodeWeight) {
  double batch = e.numRequests - (1.0 - decodeWeight) * e.decodeBatch;
  if (batch < 0) batch = 0;
  return (e.pendingPrefill + uncachedTokens) * (batch + 1.0);
}

// unified_kv_both's fallback: LMetric scaled up by the instance's KV usage.
inline double kvWeightedScore(const EffectiveState& e, double uncachedTokens, double decodeWeight) {
  return lmetricScore(e, uncachedTokens, decodeWeight) * (1.0 + e.kvUsage);
}

// min_ttft: the request's predicted time to first token on the instance, in
// token-equivalents of prefill work:
//   (queued prefill + uncached x (1 + attentionWeight x (cached + uncached / 2)))
//     x (1 + batchWeight x requests on the instance)
//     x (1 + kvWeight x max(0, KV usage with this request's blocks - kvThreshold))
// The uncached tokens attend to the cached ones and to each other (the
// quadratic term); the requests already there slow every step; an instance
// whose KV the request would fill makes it wait for blocks, or preempts.
inline double minTtftScore(const EffectiveState& e, double uncachedTokens, double cachedTokens, double addedKv,
                           const PolicyConfig& p) {
  const double own = uncachedTokens * (1.0 + p.attentionWeight * (cachedTokens + uncachedTokens / 2.0));
  double score = (e.pendingPrefill + own) * (1.0 + p.batchWeight * e.numRequests);
  const double over = e.kvUsage + addedKv - p.kvThreshold;
  // kvWeight 0 must leave the score alone even when the usage is infinite (a zero capacity).
  if (p.kvWeight > 0 && over > 0) score *= 1.0 + p.kvWeight * over;
  return score;
}

}  // namespace kvroute
