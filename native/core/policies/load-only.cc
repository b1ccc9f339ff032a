// load_only — the candidate with the fewest requests, then the lower slot.
// Scores: load.
#include "core/policies/registry.h"

namespace kvroute {
namespace {

class LoadOnly final : public Policy {
 public:
  Decision decide(DecisionContext& ctx) const override { return Decision{leastLoaded(ctx), Reason::kLeastLoaded}; }
};

}  // namespace

const Policy& loadOnlyPolicy() {
  static const LoadOnly policy;
  return policy;
}

}  // namespace kvroute
