// offload — the prefill-offload layer (issue #18): over any base policy,
// decides whether a request's prefill runs on the decode target T the base
// policy picked, or on another instance P whose KV is then moved to T.
//
// Why it exists: a cold prefill co-located with running decodes stalls every
// one of them for the prefill's steps (the B2 microbenchmark, docs/glossary.md:
// 14-214x TPOT), while shipping the prefill's KV from an idle instance costs a
// wire time plus a connection overhead. The cost model is the C++ twin of
// src/core/offload-cost.ts: the same formulas in the same evaluation order, so
// both cores compute bit-identical numbers (the build disables FMA contraction).
//
//   prefillMs(n, c)  = ceil(n / chunkTokens) x stepOverheadMs
//                      + prefillMsPerToken x n + attentionMsPerToken2 x n x (c + n / 2)
//   interferenceMs   = prefillMs(n, c) x decodeBatch            (0 when not decoding)
//   wireMs(n)        = n x kvBytesPerToken x 8 / (linkGbps x 1e6)   (/ layers if layerwise)
//   transferMs(n)    = wireMs(n) + warmOverheadMs (+ coldPenaltyMs on a pair's first use)
//
// The decision (docs/policies.md "The offload layer"), for target T with
// effective decode batch d, uncached tokens n and cached tokens c = input - n:
//   d = 0                      -> not_decoding
//   n <= thresholdTokens       -> below_threshold
//   P = the least-loaded candidate other than T whose decode batch is 0
//       (fewest requests, then least pending prefill, then lowest slot)
//   no P                       -> no_prefill_instance (transfer priced warm)
//   interference > transfer(n, pair (P, T) cold) -> offload, else colocate
//
// With chargePrefill (opt-in; off, the rule above holds bit for bit), P pays
// for what it lacks: among the same decode-free candidates, P minimises
//   ownMs(P) = prefillMs(n_P, input - n_P) + prefillMs(pendingPrefill_P, 0)
// (ties: fewest requests, least pending prefill, lowest slot), and
//   extraPrefillMs = ownMs(P) - prefillMs(n, c)
//   interference > transfer + max(0, extraPrefillMs) -> offload, else colocate
//
// Invariants: a pair is warm only after a dispatched offload between exactly
// those slots, and forgetting a slot (instance removed) makes every pair with
// it cold. Complexity: O(candidates) per decision with the layer on; nothing
// at all with it off (the router never calls in). WarmPairs holds one bit per
// (prefill slot, decode slot) pair used, rows grown on first use.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/engine-state.h"

namespace kvroute {

// src/core/offload-cost.ts OffloadCostModel and DEFAULT_OFFLOAD_COST, field for field.
struct OffloadCostModel {
  double thresholdTokens = 1000;
  double linkGbps = 25;
  double warmOverheadMs = 35;
  double coldPenaltyMs = 140;
  bool layerwise = false;
  double layers = 48;
  double kvBytesPerToken = 98304;
  double stepOverheadMs = 35.0;
  double prefillMsPerToken = 0.04518;
  double attentionMsPerToken2 = 5.48e-6;
  double chunkTokens = 8192;
  bool chargePrefill = false;
};

inline double offloadPrefillMs(const OffloadCostModel& m, double uncached, double cached) {
  if (uncached <= 0) return 0;
  const double chunks = std::ceil(uncached / m.chunkTokens);
  return chunks * m.stepOverheadMs + m.prefillMsPerToken * uncached +
         m.attentionMsPerToken2 * uncached * (cached + uncached / 2);
}

inline double offloadInterferenceMs(const OffloadCostModel& m, double uncached, double cached, double decodeBatch) {
  return decodeBatch > 0 ? offloadPrefillMs(m, uncached, cached) * decodeBatch : 0;
}

inline double offloadWireMs(const OffloadCostModel& m, double tokens) {
  const double ms = (tokens * m.kvBytesPerToken * 8) / (m.linkGbps * 1e6);
  return m.layerwise ? ms / m.layers : ms;
}

inline double offloadTransferMs(const OffloadCostModel& m, double tokens, bool coldPair) {
  return offloadWireMs(m, tokens) + m.warmOverheadMs + (coldPair ? m.coldPenaltyMs : 0);
}

// Numeric values cross into TypeScript (src/core/codes.ts OFFLOAD_OUTCOMES):
// append, never renumber.
enum class OffloadOutcome : int32_t {
  kOff = 0,                // the policy has no offload layer
  kNotDecoding = 1,        // the target holds no decoding request
  kBelowThreshold = 2,     // the target's uncached prefill is at most the threshold
  kNoPrefillInstance = 3,  // no other candidate is free of decodes
  kColocate = 4,           // the transfer costs at least the interference
  kOffload = 5,            // prefill on prefillSlot, decode on the target
};
constexpr int32_t kOffloadOutcomeCount = 6;

struct OffloadResult {
  OffloadOutcome outcome = OffloadOutcome::kOff;
  int32_t prefillSlot = -1;   // kOffload only
  double prefillTicket = -1;  // kOffload on a dispatched route only
  double interferenceMs = 0;
  double transferMs = 0;
  double extraPrefillMs = 0;  // chargePrefill with a P only: ownMs(P) - prefillMs(n, c)
  bool coldPair = false;
};

// Which (prefill slot, decode slot) pairs have carried an offload.
class WarmPairs {
 public:
  bool warm(uint32_t prefill, uint32_t decode) const {
    if (prefill >= rows_.size()) return false;
    const std::vector<uint64_t>& row = rows_[prefill];
    const size_t word = decode / 64;
    return word < row.size() && ((row[word] >> (decode % 64)) & 1u) != 0;
  }
  void mark(uint32_t prefill, uint32_t decode);
  // Every pair with `slot` on either side becomes cold (its instance was removed).
  void forget(uint32_t slot);
  size_t count() const;

 private:
  std::vector<std::vector<uint64_t>> rows_;  // by prefill slot: a bit per decode slot
};

// The layer's decision for `target` over the request's candidate slots
// (ascending), with every candidate's effective state and uncached tokens
// indexed by slot. Leaves prefillTicket at -1: opening it is the router's.
OffloadResult decideOffload(const OffloadCostModel& model, uint32_t target, const std::vector<uint32_t>& candidates,
                            const std::vector<EffectiveState>& eff, const std::vector<double>& uncached,
                            double inputTokens, const WarmPairs& pairs);

}  // namespace kvroute
