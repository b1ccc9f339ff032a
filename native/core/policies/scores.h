// scores — the per-candidate scores of the cost-based policies (lower is
// better), the twins of the score functions in src/core/reference/engine-state.ts.
// Scores must be bit-identical to the TypeScript reference: the build turns
// off fused multiply-add (-ffp-contract=off), and the expressions keep its order.
#pragma once

#include "core/engine-state.h"
#include "core/instance-costs.h"
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
// the unit of the instance's costs (instance-costs.h): seconds with learned
// costs, token-equivalents of prefill work without:
//   work  = queued prefill + returning sessions' expected prefill
//           + uncached x (1 + attentionWeight x (cached + uncached / 2))
//   score = (overhead + secondsPerToken x work x (1 + interference x requests on the instance))
//           x (1 + kvWeight x max(0, KV usage with this request's blocks - kvThreshold))
// The uncached tokens attend to the cached ones and to each other (the
// quadratic term); the requests already there slow every step; an instance
// whose KV the request would fill makes it wait for blocks, or preempts.
// Without costs (1, 0, batchWeight, 0) every step is exact, so the score is
// bit-identical to the token-equivalent one: x + 0 == x and 1 x x == x.
inline double minTtftScore(const EffectiveState& e, double uncachedTokens, double cachedTokens, double addedKv,
                           const PolicyConfig& p, const CostTerms& c) {
  const double own = uncachedTokens * (1.0 + p.attentionWeight * (cachedTokens + uncachedTokens / 2.0));
  const double work = (e.pendingPrefill + c.returningTokens + own) * (1.0 + c.interference * e.numRequests);
  double score = c.overheadSeconds + c.secondsPerToken * work;
  const double over = e.kvUsage + addedKv - p.kvThreshold;
  // kvWeight 0 must leave the score alone even when the usage is infinite (a zero capacity).
  if (p.kvWeight > 0 && over > 0) score *= 1.0 + p.kvWeight * over;
  return score;
}

}  // namespace kvroute
