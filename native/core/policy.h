// policy — the routing policies of DESIGN.md, their tunables, and the reason
// codes every decision reports.
//
// The seeds' names are the CLI names. Numeric values of PolicyKind and Reason
// cross into TypeScript (src/core/codes.ts) and are stable: append, never
// renumber. docs/policies.md states every rule and tie-break.
#pragma once

#include <cstdint>

#include "core/engine-state.h"
#include "core/offload.h"

namespace kvroute {

enum class PolicyKind : int32_t {
  kRoundRobin = 0,
  kSessionHash = 1,
  kLoadOnly = 2,
  kLmetric = 3,
  kSticky = 4,
  kUnified = 5,
  kUnifiedKvBoth = 6,
  kMinTtft = 7,
};
constexpr int32_t kPolicyKindCount = 8;

enum class Reason : int32_t {
  kRoundRobin = 0,   // round_robin, or session_hash with nothing to hash
  kSessionHash = 1,  // session_hash ring placement
  kLeastLoaded = 2,  // load_only, or sticky without a session
  kLmetric = 3,      // lmetric's lowest score
  kNewSession = 4,   // sticky: first turn placed on the least loaded instance
  kPinned = 5,       // sticky: later turn on the session's instance
  kRepinned = 6,     // sticky: the pinned instance was drained or removed
  kAffinity = 7,     // unified*: best-cached instance passed the gate
  kFallback = 8,     // unified*: best match ratio not above the threshold
  kOverload = 9,     // unified*: best-cached instance over overload_factor x mean load
  kKvPressure = 10,  // unified_kv_both: best-cached instance over the KV gate
  kMinTtft = 11,     // min_ttft: the lowest predicted TTFT
  kCacheSlack = 12,  // min_ttft: the best-cached instance, within affinitySlack of the lowest
  kSpread = 13,      // min_ttft: a near-tie, broken by fewest requests, then the session's hash
  // ringFirstTurn: a session this router has not placed, or whose instance left, on its ring instance
  kRingFirstTurn = 14,
};
constexpr int32_t kReasonCount = 15;

struct PolicyConfig {
  PolicyKind kind = PolicyKind::kUnified;
  double affinityThreshold = 0.5;  // unified*: match ratio must exceed this
  double overloadFactor = 2.0;     // unified*: load gate multiplier on the mean
  double decodeWeight = 1.0;       // lmetric and fallbacks: weight of a decoding request
  uint32_t ringVnodes = 160;       // session_hash: points per instance
  // min_ttft (docs/policies.md "min_ttft"):
  double batchWeight = 0.2;           // slowdown of a prefill per request on the instance
  double attentionWeight = 1.213e-4;  // attention cost per token of context, relative to a token's own cost
  double affinitySlack = 0.3;         // the best-cached instance wins within (1 + slack) x the lowest score
  double tieTolerance = 0.02;         // scores within (1 + tolerance) x the lowest are a tie
  double kvWeight = 6.0;              // penalty per unit of KV usage past kvThreshold, after placing
  double kvThreshold = 0.5;           // KV usage (in-flight blocks / capacity) where the penalty starts
  // Replica-consistent first turns (docs/policies.md "Ring first turns"): a
  // session this router has not placed goes to its session-ring instance,
  // which depends only on the instance ids, so every replica agrees.
  bool ringFirstTurn = false;
  // The offload layer over the policy (offload.h); off unless the policy names it.
  bool offload = false;
  OffloadCostModel offloadCost;
};

// The policies ringFirstTurn applies to: those that keep a session where its
// cache is (cache-aware scores) or pin it (sticky). The others ignore it.
inline bool readsRingFirstTurn(PolicyKind kind) {
  return kind == PolicyKind::kSticky || kind == PolicyKind::kLmetric || kind == PolicyKind::kUnified ||
         kind == PolicyKind::kUnifiedKvBoth || kind == PolicyKind::kMinTtft;
}

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
