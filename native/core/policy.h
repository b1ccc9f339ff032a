// policy — the routing policies' kinds (their CLI names), their tunables, and
// the reason codes every decision reports. The rules themselves live in
// policies/, one file per policy (policies/registry.h maps a kind to its object).
//
// Numeric values of PolicyKind and Reason
// cross into TypeScript (src/core/codes.ts) and are stable: append, never
// renumber. docs/policies.md states every rule and tie-break.
#pragma once

#include <cstdint>

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

}  // namespace kvroute
