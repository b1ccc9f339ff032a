// round_robin — each candidate in turn, one cursor per candidate set (so one
// model group's requests never move where another's go next). Scores: load.
#include "core/policies/registry.h"

namespace kvroute {
namespace {

class RoundRobin final : public Policy {
 public:
  Decision decide(DecisionContext& ctx) const override {
    return Decision{ctx.host.roundRobin(ctx.in.dryRun), Reason::kRoundRobin};
  }
};

}  // namespace

const Policy& roundRobinPolicy() {
  static const RoundRobin policy;
  return policy;
}

}  // namespace kvroute
