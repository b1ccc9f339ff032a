// lmetric — the lowest LMetric score (scores.h: prefill tokens x (batch + 1),
// the request's uncached tokens included), then the lower slot.
#include "core/policies/registry.h"
#include "core/policies/scores.h"

namespace kvroute {
namespace {

class Lmetric final : public Policy {
 public:
  void score(DecisionContext& ctx) const override {
    for (uint32_t s : ctx.candidates) {
      ctx.scores[s] = lmetricScore(ctx.eff[s], ctx.uncached[s], ctx.policy.decodeWeight);
    }
  }
  Decision decide(DecisionContext& ctx) const override { return Decision{lowestScore(ctx), Reason::kLmetric}; }
  bool readsRingFirstTurn() const override { return true; }
};

}  // namespace

const Policy& lmetricPolicy() {
  static const Lmetric policy;
  return policy;
}

}  // namespace kvroute
