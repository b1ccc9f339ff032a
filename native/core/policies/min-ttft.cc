// min_ttft — the lowest predicted time to first token (scores.h), with two
// refinements (docs/policies.md "min_ttft"): the best-cached candidate (most
// matched blocks, then the lower score, then the lower slot) wins when its
// score is within (1 + affinitySlack) x the lowest; and near-ties (within
// (1 + tieTolerance) x the lowest) go to the fewest requests, then the
// session's hash picks among those, so an idle fleet spreads new sessions
// instead of filling slot 0. O(candidates), three passes at most.
#include "core/policies/registry.h"
#include "core/policies/scores.h"

namespace kvroute {
namespace {

// The key that breaks near-ties: the session's, else the first block's (as
// session_hash keys it), else 0.
uint64_t spreadKey(const RouteInput& in) {
  if (in.hasSession) return in.sessionKey;
  if (in.n == 0) return 0;
  return firstBlockKey(in.ids[0]);
}

class MinTtft final : public Policy {
 public:
  void score(DecisionContext& ctx) const override {
    const RouteInput& in = ctx.in;
    for (uint32_t s : ctx.candidates) {
      const double uncached = ctx.uncached[s];
      ctx.scores[s] = minTtftScore(ctx.eff[s], uncached, in.inputTokens - uncached,
                                   static_cast<double>(in.n) / ctx.capacity[s], ctx.policy, ctx.costs[s]);
    }
  }

  Decision decide(DecisionContext& ctx) const override {
    const PolicyConfig& p = ctx.policy;
    const double* scores = ctx.scores;
    const int32_t* matched = ctx.matched;
    const EffectiveState* eff = ctx.eff;
    Decision out;
    int32_t lowest = -1;
    int32_t cached = -1;
    for (uint32_t s : ctx.candidates) {
      if (lowest < 0 || scores[s] < scores[lowest]) lowest = static_cast<int32_t>(s);
      if (cached < 0 || matched[s] > matched[cached] || (matched[s] == matched[cached] && scores[s] < scores[cached])) {
        cached = static_cast<int32_t>(s);
      }
    }
    if (lowest < 0) return out;
    const double floor = scores[lowest];
    if (cached != lowest && matched[cached] > 0 && scores[cached] <= floor * (1.0 + p.affinitySlack)) {
      return Decision{cached, Reason::kCacheSlack};
    }
    const double limit = floor * (1.0 + p.tieTolerance);
    double fewest = 0;
    uint32_t ties = 0;
    // The lowest is always among the ties, so there is at least one even when
    // the scores are not comparable (NaN from a zero-capacity instance).
    const auto tied = [&](uint32_t s) { return static_cast<int32_t>(s) == lowest || scores[s] <= limit; };
    for (uint32_t s : ctx.candidates) {
      if (!tied(s)) continue;
      if (ties == 0 || eff[s].numRequests < fewest) {
        fewest = eff[s].numRequests;
        ties = 1;
      } else if (eff[s].numRequests == fewest) {
        ties += 1;
      }
    }
    if (ties <= 1 && eff[lowest].numRequests == fewest) return Decision{lowest, Reason::kMinTtft};
    uint64_t pick = spreadKey(ctx.in) % ties;
    for (uint32_t s : ctx.candidates) {
      if (!tied(s) || eff[s].numRequests != fewest) continue;
      if (pick-- == 0) {
        out.slot = static_cast<int32_t>(s);
        break;
      }
    }
    out.reason = Reason::kSpread;
    return out;
  }

  bool readsRingFirstTurn() const override { return true; }
};

}  // namespace

const Policy& minTtftPolicy() {
  static const MinTtft policy;
  return policy;
}

}  // namespace kvroute
