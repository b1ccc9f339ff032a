// unified and unified_kv_both — cache affinity behind load gates. The
// best-cached candidate (most matched blocks, then fewer requests, then the
// lower slot) wins when its match ratio exceeds affinityThreshold and its load
// is within overloadFactor x the candidates' mean (unified_kv_both: its KV
// usage too); otherwise the lowest score: LMetric (unified) or LMetric scaled
// by KV usage (unified_kv_both). One pass over the candidates.
#include "core/policies/registry.h"
#include "core/policies/scores.h"

namespace kvroute {
namespace {

class Unified final : public Policy {
 public:
  explicit Unified(bool kvGate) : kvGate_(kvGate) {}

  void score(DecisionContext& ctx) const override {
    const double decodeWeight = ctx.policy.decodeWeight;
    for (uint32_t s : ctx.candidates) {
      ctx.scores[s] = kvGate_ ? kvWeightedScore(ctx.eff[s], ctx.uncached[s], decodeWeight)
                              : lmetricScore(ctx.eff[s], ctx.uncached[s], decodeWeight);
    }
  }

  Decision decide(DecisionContext& ctx) const override {
    const PolicyConfig& p = ctx.policy;
    const EffectiveState* eff = ctx.eff;
    const int32_t* matched = ctx.matched;
    Decision out;
    // The gates' means are over the candidates too.
    int32_t best = -1;
    double loadSum = 0;
    double kvSum = 0;
    const uint32_t candidateCount = static_cast<uint32_t>(ctx.candidates.size());
    for (uint32_t s : ctx.candidates) {
      loadSum += eff[s].numRequests;
      kvSum += eff[s].kvUsage;
      if (best < 0 || matched[s] > matched[best] ||
          (matched[s] == matched[best] && eff[s].numRequests < eff[best].numRequests)) {
        best = static_cast<int32_t>(s);
      }
    }
    if (best < 0) return out;
    const uint32_t n = ctx.in.n;
    const double ratio = n > 0 ? static_cast<double>(matched[best]) / static_cast<double>(n) : 0.0;
    const double meanLoad = loadSum / candidateCount;
    const double meanKv = kvSum / candidateCount;
    if (!(ratio > p.affinityThreshold)) {
      out.reason = Reason::kFallback;
    } else if (!(eff[best].numRequests <= p.overloadFactor * meanLoad)) {
      out.reason = Reason::kOverload;
    } else if (kvGate_ && !(eff[best].kvUsage <= p.overloadFactor * meanKv)) {
      out.reason = Reason::kKvPressure;
    } else {
      out.slot = best;
      out.reason = Reason::kAffinity;
      return out;
    }
    out.slot = lowestScore(ctx);
    return out;
  }

  bool readsRingFirstTurn() const override { return true; }

 private:
  const bool kvGate_;  // unified_kv_both
};

}  // namespace

const Policy& unifiedPolicy() {
  static const Unified policy(false);
  return policy;
}

const Policy& unifiedKvBothPolicy() {
  static const Unified policy(true);
  return policy;
}

}  // namespace kvroute
