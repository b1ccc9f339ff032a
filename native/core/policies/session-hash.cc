// session_hash — the session's instance on the consistent-hash ring (vnodes:
// PolicyConfig::ringVnodes). Without a session it keys on the first block, so
// requests sharing a first block (a common system prompt) share an instance;
// with neither, round robin. Scores: load. O(log(vnodes)) per decision.
#include "core/policies/registry.h"

namespace kvroute {
namespace {

class SessionHash final : public Policy {
 public:
  Decision decide(DecisionContext& ctx) const override {
    const RouteInput& in = ctx.in;
    if (!in.hasSession && in.n == 0) return Decision{ctx.host.roundRobin(in.dryRun), Reason::kRoundRobin};
    const uint64_t key = in.hasSession ? in.sessionKey : firstBlockKey(in.ids[0]);
    return Decision{ctx.host.ringLookup(key), Reason::kSessionHash};
  }
};

}  // namespace

const Policy& sessionHashPolicy() {
  static const SessionHash policy;
  return policy;
}

}  // namespace kvroute
