// policy-interface — what every routing policy implements, and what one
// decision reads (the twin of DecisionContext in src/core/reference/policy.ts).
//
// Why it exists: Router::route() gathers the request's candidates, their
// effective state and matches once, then hands them to the configured policy.
// A policy is a stateless object (one static instance per kind, registry.h):
// it fills the candidates' scores and picks one. Whatever it must change in the
// router (round-robin cursors, session pins) goes through PolicyHost, so a
// policy file holds the rule and nothing else. Adding a policy: one new file
// and one line in registry.cc (plus its PolicyKind, policy.h).
//
// Invariants: everything ranges over ctx.candidates (ascending slots); the
// per-slot arrays are indexed by slot and valid for candidates only. Every rule
// and tie-break is in docs/policies.md; keep it, this folder and
// src/core/reference/policy.ts in step. Cost per decision: O(candidates).
#pragma once

#include <cstdint>
#include <vector>

#include "core/engine-state.h"
#include "core/instance-costs.h"
#include "core/policy.h"
#include "core/route-io.h"
#include "core/session-table.h"

namespace kvroute {

// What a policy may ask of the router that owns the decision.
class PolicyHost {
 public:
  // The next candidate in this candidate set's rotation; the cursor moves unless dryRun. -1: none.
  virtual int32_t roundRobin(bool dryRun) = 0;
  // The first candidate clockwise from `key` on the session ring, or -1.
  virtual int32_t ringLookup(uint64_t key) = 0;
  // The session pin under `key` (peeked on a dry run, so nothing moves), or null.
  virtual const SessionPin* findPin(uint64_t key, bool dryRun) = 0;
  // A pin is honoured while its instance is a candidate and still the instance it was made to.
  virtual bool honoured(const SessionPin& pin) const = 0;
  // Pins `key` to the instance now in `slot`.
  virtual void pin(uint64_t key, uint32_t slot) = 0;

 protected:
  ~PolicyHost() = default;
};

// One decision's inputs; arrays are indexed by slot.
struct DecisionContext {
  const RouteInput& in;
  const PolicyConfig& policy;
  const std::vector<uint32_t>& candidates;  // ascending
  const EffectiveState* eff;
  const int32_t* matched;
  const double* uncached;  // this request's uncached tokens per slot
  const double* capacity;  // KV capacity in blocks per slot
  const CostTerms* costs;  // the costs in force per slot (instance-costs.h)
  double* scores;          // filled by Policy::score
  PolicyHost& host;
};

// A decision: the slot (-1: no candidate) and why.
struct Decision {
  int32_t slot = -1;
  Reason reason = Reason::kRoundRobin;
};

class Policy {
 public:
  virtual ~Policy() = default;
  // Fills ctx.scores for every candidate. The default, for the policies that
  // rank by load: the candidate's request count.
  virtual void score(DecisionContext& ctx) const;
  // Picks the instance; score() has run.
  virtual Decision decide(DecisionContext& ctx) const = 0;
  // Whether ringFirstTurn applies (docs/policies.md "Ring first turns"): the
  // policies that keep a session where its cache is (cache-aware scores) or
  // pin it (sticky). The others ignore it.
  virtual bool readsRingFirstTurn() const { return false; }
};

// The candidate with the fewest requests (then the lower slot), or -1.
inline int32_t leastLoaded(const DecisionContext& ctx) {
  int32_t best = -1;
  for (uint32_t s : ctx.candidates) {
    if (best < 0 || ctx.eff[s].numRequests < ctx.eff[best].numRequests) best = static_cast<int32_t>(s);
  }
  return best;
}

// The candidate with the lowest score (then the lower slot), or -1.
inline int32_t lowestScore(const DecisionContext& ctx) {
  int32_t best = -1;
  for (uint32_t s : ctx.candidates) {
    if (best < 0 || ctx.scores[s] < ctx.scores[best]) best = static_cast<int32_t>(s);
  }
  return best;
}

// XXH64 of a block id's eight little-endian bytes: how session_hash (and
// min_ttft's spread) key a request without a session.
uint64_t firstBlockKey(uint64_t id);

// sticky's (and ringFirstTurn's) pin key for (session, model group): the
// session's key alone without a group, else XXH64 of the group's four
// little-endian bytes seeded with it (docs/policies.md).
uint64_t pinKey(uint64_t sessionKey, int32_t group);

}  // namespace kvroute
