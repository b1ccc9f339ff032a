// policy — the routing policies of DESIGN.md, their tunables, and the reason
// codes every decision reports.
//
// The seeds' names are the CLI names. Numeric values of PolicyKind and Reason
// cross into TypeScript (src/core/codes.ts) and are stable: append, never
// renumber. docs/policies.md states every rule and tie-break.
#pragma once

#include <cstdint>

#include "engine-state.h"

namespace kvroute {

enum class PolicyKind : int32_t {
  kRoundRobin = 0,
  kSessionHash = 1,
  kLoadOnly = 2,
  kLmetric = 3,
  kSticky = 4,
  kUnified = 5,
  kUnifiedKvBoth = 6,
};
constexpr int32_t kPolicyKindCount = 7;

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
};
constexpr int32_t kReasonCount = 11;

struct PolicyConfig {
  PolicyKind kind = PolicyKind::kUnified;
  double affinityThreshold = 0.5;  // unified*: match ratio must exceed this
  double overloadFactor = 2.0;     // unified*: load gate multiplier on the mean
  double decodeWeight = 1.0;       // lmetric and fallbacks: weight of a decoding request
  uint32_t ringVnodes = 160;       // session_hash: points per instance
};

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

}  // namespace kvroute
