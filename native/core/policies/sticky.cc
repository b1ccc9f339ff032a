// sticky — a session stays on the instance of its first turn. One pin per
// (session, model group) (pinKey); a pin is honoured only to a candidate that
// is still the instance it was made to, else the session is re-pinned to the
// least loaded candidate. Without a session: the least loaded. Scores: load.
// One session-table lookup per decision.
#include "core/policies/registry.h"

namespace kvroute {
namespace {

class Sticky final : public Policy {
 public:
  Decision decide(DecisionContext& ctx) const override {
    const RouteInput& in = ctx.in;
    if (!in.hasSession) return Decision{leastLoaded(ctx), Reason::kLeastLoaded};
    const uint64_t key = pinKey(in.sessionKey, in.group);
    const SessionPin* pin = ctx.host.findPin(key, in.dryRun);
    if (pin != nullptr && ctx.host.honoured(*pin)) return Decision{static_cast<int32_t>(pin->slot), Reason::kPinned};
    Decision out{leastLoaded(ctx), pin != nullptr ? Reason::kRepinned : Reason::kNewSession};
    if (out.slot >= 0 && !in.dryRun) ctx.host.pin(key, static_cast<uint32_t>(out.slot));
    return out;
  }
  bool readsRingFirstTurn() const override { return true; }
};

}  // namespace

const Policy& stickyPolicy() {
  static const Sticky policy;
  return policy;
}

}  // namespace kvroute
