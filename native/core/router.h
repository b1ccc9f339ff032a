// router — the routing core: instances, their block indexes and load state,
// and the policy that picks one instance per request.
//
// Why it exists: the proxy, the embedding API and the simulator all drive this
// one object. It never allocates per request once warm: scratch arrays are
// sized to the slot count and reused, and results go to caller-owned arrays.
//
// Slots: an instance lives in a slot (its index in every per-instance array).
// New instances take the lowest free slot; removal frees it and bumps the
// slot's generation so stale pins and tickets are recognised. "Lowest index"
// in every tie-break means lowest slot.
//
// Model groups: an instance serves any model (a wildcard, the default) or the
// groups (model ids, interned by the caller) it declares. A request naming a
// group considers only its candidates: the routable instances that declare the
// group or are wildcards. For the set of requests without a group, and for
// each group, a candidate set (an ascending slot list, a membership byte per
// slot and a round-robin cursor) is rebuilt wherever the fleet changes
// (add/drain/remove/setInstanceGroups), so route() picks one set and never
// tests membership per instance. Rebuild: O(slots x groups).
//
// Per route(): one lockstep prefix match over every live instance
// (O(N log n) probes), O(candidates) policy scoring, then, unless it is a dry
// run, BlockIndex::commit on the chosen instance and the shadow counter moves.
//
// ringFirstTurn (policy.h, docs/policies.md): a request with a session adds one session-table
// lookup and, for a session new to this router, one ring lookup
// (O(log(N vnodes))) before the policy.
//
// Policies (policies/): route() hands the candidates to the configured
// policy's object (policies/registry.h), which scores them and picks one.
//
// Offload (offload.h): with the policy's layer on, the decision for the base
// policy's target runs next (O(candidates)); an `offload` of a dispatched
// route commits the request's blocks on the prefill instance too and opens a
// second ticket there carrying the prefill (its uncached tokens), while the
// target's ticket carries none (its KV arrives by transfer). lastOffload()
// holds the layer's result until the next route().
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/block-index.h"
#include "core/engine-state.h"
#include "core/event-index.h"
#include "core/fleet-index.h"
#include "core/hash-ring.h"
#include "core/instance-costs.h"
#include "core/policies/policy-interface.h"
#include "core/policy.h"
#include "core/route-io.h"
#include "core/session-table.h"
#include "core/ticket-table.h"
#include "feed/shm-feed.h"

namespace kvroute {

struct RouterConfig {
  PolicyConfig policy;
  double blockTokens = 16;    // tokens per block of a request's ids
  double stalenessMs = 2000;  // observed snapshots older than this are ignored
  uint32_t maxSessions = 1u << 20;
  bool manualClock = false;  // time only moves through setTime() (simulation)
  // The shared-memory engine-state feed (docs/shm-layout.md); empty = shadow only.
  // Feed slot i is the instance in router slot i. Freshness is judged on the
  // wall clock (CLOCK_REALTIME), whatever `manualClock` says; a timestamp more
  // than shm::kMaxFutureNs ahead of it is not fresh (shm::snapshotFresh).
  std::string feedPath;
  double feedRecheckMs = 100;
};

// A candidate's terms in route()'s `terms` output, per slot: the effective
// state the policy read and the request's uncached tokens there.
constexpr size_t kTermPendingPrefill = 0;
constexpr size_t kTermRequests = 1;
constexpr size_t kTermKvUsage = 2;
constexpr size_t kTermUncached = 3;
// The costs min_ttft priced the candidate with (instance-costs.h).
constexpr size_t kTermReturning = 4;
constexpr size_t kTermSecondsPerToken = 5;
constexpr size_t kTermOverhead = 6;
constexpr size_t kTermInterference = 7;
constexpr size_t kTermCount = 8;

struct InstanceStats {
  uint64_t capacityBlocks, blocks, segments, bytes;
  ShadowCounters shadow;
  ShadowCounters peer;
  EffectiveState effective;
  bool observedFresh;
  uint64_t routed, completed, aborted;
};

enum class TicketEvent { kFirstToken, kComplete, kAbort };

class Router final : private PolicyHost {
 public:
  explicit Router(const RouterConfig& config);

  size_t slotCount() const { return instances_.size(); }
  bool isLive(uint32_t slot) const { return slot < instances_.size() && instances_[slot].live; }
  bool isDrained(uint32_t slot) const { return isLive(slot) && instances_[slot].drained; }

  // Adds an instance in the lowest free slot and returns the slot.
  uint32_t addInstance(const std::string& name, uint64_t capacityBlocks);
  // drained = false puts a drained instance back into routing, its cache model and counters intact.
  void drainInstance(uint32_t slot, bool drained = true);
  void removeInstance(uint32_t slot);
  // The groups the instance serves: `wildcard` (any model; what addInstance
  // gives), or exactly groups[0..n) (none when n = 0). Group ids must be below
  // kMaxGroups; groupCount() grows to cover them and never shrinks. Caches,
  // counters and pins stay.
  void setInstanceGroups(uint32_t slot, bool wildcard, const uint32_t* groups, uint32_t n);
  static constexpr uint32_t kMaxGroups = 65536;
  // Group ids a request may name: [0, groupCount()). Group 0 always exists.
  uint32_t groupCount() const { return static_cast<uint32_t>(groups_.size()); }
  bool isWildcard(uint32_t slot) const { return instances_[slot].wildcard; }
  const std::vector<uint32_t>& instanceGroups(uint32_t slot) const { return instances_[slot].groups; }

  // min_ttft's price of the instance (instance-costs.h): `costs`, or null for
  // token-equivalents (1, 0, the policy's batchWeight). The caller has checked
  // the fields. add/removeInstance reset both to none.
  void setInstanceCosts(uint32_t slot, const InstanceCosts* costs);
  // The expected prefill of sessions idle on the instance between turns (>= 0).
  void setReturningTokens(uint32_t slot, double tokens) { instances_[slot].returningTokens = tokens; }

  // matched[] and scores[] have slotCount() entries. matched gets every live
  // slot's match (-1 for free slots); scores gets each candidate's policy
  // score (NaN for the others: drained, or not serving the request's group).
  // `terms` (nullable): kTermCount per slot, what the decision read of each
  // candidate (kTerm* below). A non-candidate's are left as they were: its
  // score is NaN, which is how a reader tells (explain() shows null).
  RouteOutput route(const RouteInput& in, int32_t* matched, double* scores, double* terms = nullptr);
  void match(const uint64_t* ids, uint32_t n, int32_t* matched);
  // match() for a request: with in.tokenKeys, event-fed slots' entries come
  // from the event index (eventMatchLimit() caps them), the rest from match().
  void matchRequest(const RouteInput& in, int32_t* matched);
  // vLLM never reports the whole prompt cached: an event-fed match counts at
  // most floor((inputTokens - 1) / blockTokens) blocks (and at most n).
  static uint32_t eventMatchLimit(const RouteInput& in);

  // The event-fed index (event-index.h). Its contents are kept whether or not
  // the slot is event-fed; add/removeInstance reset the slot's.
  void setEventFed(uint32_t slot, bool on) { events_.setFed(slot, on); }
  bool eventFed(uint32_t slot) const { return events_.fed(slot); }
  // `packed` must be a stream EventIndex::validate() accepts.
  void applyKvEvents(uint32_t slot, const PackedKvEvents& packed) { events_.apply(slot, packed); }
  void clearKvEvents(uint32_t slot) { events_.clear(slot); }
  const EventIndex& events() const { return events_; }

  // False when the ticket is not open (unknown, or already completed/aborted).
  bool onTicket(double ticket, TicketEvent event);

  void setObserved(uint32_t slot, const ObservedState& observed);
  // Other replicas' in-flight load on the slot's engine (engine-state.h), replacing
  // the previous value; zeros clear it. Reset when the slot is reused.
  void setPeerLoad(uint32_t slot, const ShadowCounters& peer);
  // Records where another replica placed a session (docs/scale-out.md): as if this
  // router had routed the session's request of model group `group` to `slot`, so a
  // later turn here follows it (sticky honours it; ringFirstTurn sees a known
  // session and lets the policy decide). Overwrites this router's own pin.
  void pinSession(uint64_t sessionKey, int32_t group, uint32_t slot);
  // -1 without a feed, else the reader's shm::FeedStatus.
  int feedStatus() const { return feed_ ? static_cast<int>(feed_->status()) : -1; }
  void setTime(double nowMs) { manualNowMs_ = nowMs; }
  double now() const;
  void setPolicy(const PolicyConfig& policy);
  const PolicyConfig& policy() const { return config_.policy; }
  // The offload layer's result for the last route() (outcome kOff without the layer).
  const OffloadResult& lastOffload() const { return lastOffload_; }
  const WarmPairs& warmPairs() const { return warmPairs_; }

  InstanceStats stats(uint32_t slot) const;
  uint64_t removeBlocks(uint32_t slot, const uint64_t* ids, uint32_t n);
  void clearBlocks(uint32_t slot);
  uint64_t setCapacity(uint32_t slot, uint64_t capacityBlocks);
  const std::array<uint64_t, kReasonCount>& reasonCounts() const { return reasonCounts_; }
  size_t openTickets() const { return tickets_.openCount(); }
  size_t sessionCount() const { return sessions_.size(); }
  std::string checkInvariants() const;
  size_t fleetBytes() const { return fleet_.bytes(); }

 private:
  struct Instance {
    bool live = false;
    bool drained = false;
    bool wildcard = true;          // serves any model
    std::vector<uint32_t> groups;  // otherwise these, ascending
    uint32_t generation = 0;
    std::string name;
    std::unique_ptr<BlockIndex> index;
    ShadowCounters shadow;
    ObservedState observed;
    uint64_t routed = 0, completed = 0, aborted = 0;
    bool hasCosts = false;
    InstanceCosts costs;
    double returningTokens = 0;
  };

  // The instances a request may go to: routable, and serving its group.
  struct CandidateSet {
    std::vector<uint32_t> slots;  // ascending
    std::vector<uint8_t> member;  // per slot: 1 when in `slots`
    uint32_t cursor = 0;          // round_robin: the slot after this set's previous pick
  };

  bool routable(uint32_t slot) const { return instances_[slot].live && !instances_[slot].drained; }
  // Marks the ring stale; ringLookup rebuilds it before its next lookup, so
  // adding N instances costs one rebuild, not N.
  void rebuildRing() { ringStale_ = true; }
  // Rebuilds the live, tracked and routable slot lists and the candidate sets
  // (after add/drain/remove/setInstanceGroups).
  void refreshLiveList();
  void effective(uint32_t slot, double nowMs, EffectiveState& out) const;
  // PolicyHost: what a policy may ask of the router (policies/policy-interface.h).
  // These range over cand_, the current request's candidates.
  int32_t roundRobin(bool dryRun) override;
  // The first candidate clockwise from `key` on the session ring (rebuilt
  // first if the fleet changed), or -1.
  int32_t ringLookup(uint64_t key) override;
  const SessionPin* findPin(uint64_t key, bool dryRun) override {
    return dryRun ? sessions_.peek(key) : sessions_.lookup(key);
  }
  // A pin is honoured while its instance is a candidate of the request and
  // still the instance it was made to (same slot generation).
  bool honoured(const SessionPin& pin) const override {
    return cand_->member[pin.slot] != 0 && instances_[pin.slot].generation == pin.generation;
  }
  void pin(uint64_t key, uint32_t slot) override { sessions_.pin(key, SessionPin{slot, instances_[slot].generation}); }
  // Picks the instance; route() has filled eff_, uncached_ and capacity_, and
  // the policy's score() the scores. With ringFirstTurn (docs/policies.md
  // "Ring first turns"), a session this router has no honoured entry for goes
  // to its ring instance and is remembered in sessions_; a known one goes to
  // the policy, and its entry follows wherever that puts it.
  Decision decide(DecisionContext& ctx);
  // Commits the request's blocks on `slot` and opens its ticket there,
  // carrying `uncachedTokens` of pending prefill.
  double dispatch(const RouteInput& in, uint32_t slot, int64_t uncachedTokens);

  RouterConfig config_;
  // Declared before instances_: each BlockIndex withdraws from it when destroyed.
  FleetIndex fleet_;
  std::vector<Instance> instances_;
  // Live instances in slots below FleetIndex::kMaxInstances are matched through
  // the fleet; the rest one by one (untracked*).
  uint64_t trackedMask_ = 0;
  std::vector<const BlockIndex*> bySlot_;            // tracked slot -> index
  std::vector<const BlockIndex*> untrackedIndexes_;  // parallel to untrackedSlots_
  std::vector<uint32_t> untrackedSlots_;
  std::vector<uint32_t> liveSlots_;
  CandidateSet routable_;             // requests without a group: live and not drained
  std::vector<CandidateSet> groups_;  // by group id: routable, and wildcard or declaring it
  CandidateSet* cand_ = &routable_;   // the current route's candidates
  std::vector<int32_t> liveMatched_;
  std::vector<EffectiveState> eff_;   // per slot, valid for routable slots
  std::vector<double> uncached_;      // per slot, this request's uncached tokens
  std::vector<double> capacity_;      // per slot, the KV capacity in blocks (this route's candidates)
  std::vector<CostTerms> costs_;      // per slot, the costs in force (this route's candidates)
  const int32_t* matched_ = nullptr;  // the current route's matched[]
  const Policy* policy_ = nullptr;    // policyFor(config_.policy.kind)
  SessionTable sessions_;
  HashRing ring_;
  bool ringStale_ = true;
  TicketTable tickets_;
  uint32_t observedCount_ = 0;  // live instances holding an observed snapshot
  // Other replicas' load per slot (setPeerLoad), beside instances_ rather than in
  // Instance: the route loop walks instances_, and a bigger Instance cost every
  // route ~8% in the mooncake bench even with no peers. Zero for removed slots.
  std::vector<ShadowCounters> peerLoad_;
  uint32_t peerCount_ = 0;  // live slots with nonzero peer load
  static bool hasLoad(const ShadowCounters& c) {
    return c.running != 0 || c.waiting != 0 || c.prefillTokens != 0 || c.activeBlocks != 0;
  }
  // What effectiveStateInto adds for the instance: nothing while no instance has peer load.
  const ShadowCounters* peerOf(uint32_t slot) const { return peerCount_ > 0 ? &peerLoad_[slot] : nullptr; }
  double manualNowMs_ = 0;
  std::array<uint64_t, kReasonCount> reasonCounts_{};
  OffloadResult lastOffload_;
  WarmPairs warmPairs_;
  std::unique_ptr<shm::FeedReader> feed_;
  EventIndex events_;
  // The last snapshot taken of each feed slot, keyed by (mapping, sequence):
  // while the sequence is unchanged the copy is reused, so a decision pays one
  // load per slot, not a seqlock read.
  struct FeedCache {
    uint64_t epoch = 0;
    uint64_t seq = 1;  // odd: matches no settled slot
    bool usable = false;
    int64_t timestampNs = 0;
    ObservedState observed;
  };
  std::vector<FeedCache> feedCache_;
  int64_t feedStaleNs_ = 0;  // stalenessMs in ns
  // Slot `s` of the feed when it holds a fresh snapshot of a reachable engine
  // at `nowNs` (valid until the next call for `s`); null leaves the caller on
  // shadow: busy, never published, stale or unreachable.
  const ObservedState* readFeed(uint32_t s, int64_t nowNs);
};

}  // namespace kvroute
