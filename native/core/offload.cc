#include "core/offload.h"

#include <algorithm>

namespace kvroute {

void WarmPairs::mark(uint32_t prefill, uint32_t decode) {
  if (prefill >= rows_.size()) rows_.resize(prefill + 1);
  std::vector<uint64_t>& row = rows_[prefill];
  const size_t word = decode / 64;
  if (word >= row.size()) row.resize(word + 1, 0);
  row[word] |= uint64_t{1} << (decode % 64);
}

void WarmPairs::forget(uint32_t slot) {
  if (slot < rows_.size()) rows_[slot].clear();
  const size_t word = slot / 64;
  for (std::vector<uint64_t>& row : rows_) {
    if (word < row.size()) row[word] &= ~(uint64_t{1} << (slot % 64));
  }
}

size_t WarmPairs::count() const {
  size_t n = 0;
  for (const std::vector<uint64_t>& row : rows_) {
    for (uint64_t bits : row) n += static_cast<size_t>(__builtin_popcountll(bits));
  }
  return n;
}

OffloadResult decideOffload(const OffloadCostModel& model, uint32_t target, const std::vector<uint32_t>& candidates,
                            const std::vector<EffectiveState>& eff, const std::vector<double>& uncached,
                            double inputTokens, const WarmPairs& pairs) {
  OffloadResult r;
  const EffectiveState& t = eff[target];
  if (!(t.decodeBatch > 0)) {
    r.outcome = OffloadOutcome::kNotDecoding;
    return r;
  }
  const double n = uncached[target];
  if (n <= model.thresholdTokens) {
    r.outcome = OffloadOutcome::kBelowThreshold;
    return r;
  }
  r.interferenceMs = offloadInterferenceMs(model, n, inputTokens - n, t.decodeBatch);
  // The least-loaded decode-free candidate other than the target, or with
  // chargePrefill the one whose own prefill (its queue, then the request's
  // uncached part) finishes first, ties by load.
  int32_t best = -1;
  double bestOwnMs = 0;
  for (uint32_t s : candidates) {
    if (s == target || eff[s].decodeBatch > 0) continue;
    const bool lessLoaded =
        best < 0 || eff[s].numRequests < eff[best].numRequests ||
        (eff[s].numRequests == eff[best].numRequests && eff[s].pendingPrefill < eff[best].pendingPrefill);
    if (!model.chargePrefill) {
      if (lessLoaded) best = static_cast<int32_t>(s);
      continue;
    }
    const double own = offloadPrefillMs(model, uncached[s], inputTokens - uncached[s]) +
                       offloadPrefillMs(model, eff[s].pendingPrefill, 0);
    if (best < 0 || own < bestOwnMs || (own == bestOwnMs && lessLoaded)) {
      best = static_cast<int32_t>(s);
      bestOwnMs = own;
    }
  }
  if (best < 0) {
    r.outcome = OffloadOutcome::kNoPrefillInstance;
    r.transferMs = offloadTransferMs(model, n, false);
    return r;
  }
  r.coldPair = !pairs.warm(static_cast<uint32_t>(best), target);
  r.transferMs = offloadTransferMs(model, n, r.coldPair);
  double cost = r.transferMs;
  if (model.chargePrefill) {
    r.extraPrefillMs = bestOwnMs - offloadPrefillMs(model, n, inputTokens - n);
    cost = r.transferMs + std::max(0.0, r.extraPrefillMs);
  }
  if (r.interferenceMs > cost) {
    r.outcome = OffloadOutcome::kOffload;
    r.prefillSlot = best;
  } else {
    r.outcome = OffloadOutcome::kColocate;
  }
  return r;
}

}  // namespace kvroute
