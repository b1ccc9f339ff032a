#include "core/router.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <sstream>

#include "core/match-many.h"
#include "core/policies/registry.h"

namespace kvroute {

Router::Router(const RouterConfig& config) : config_(config), groups_(1), sessions_(config.maxSessions) {
  policy_ = &policyFor(config.policy.kind);
  if (!config.feedPath.empty()) feed_ = std::make_unique<shm::FeedReader>(config.feedPath, config.feedRecheckMs);
  feedStaleNs_ = static_cast<int64_t>(std::min(config.stalenessMs, 1e12) * 1e6);
}

const ObservedState* Router::readFeed(uint32_t s, int64_t nowNs) {
  if (s >= feedCache_.size()) feedCache_.resize(instances_.size());
  FeedCache& c = feedCache_[s];
  if (c.epoch != feed_->mapEpoch() || c.seq != feed_->sequence(s)) {
    shm::SlotValues v;
    uint64_t seq = 1;
    if (!feed_->read(s, v, false, &seq)) {
      c.seq = 1;  // busy or never published: try again next decision
      return nullptr;
    }
    c.epoch = feed_->mapEpoch();
    c.seq = seq;
    c.usable = (v.flags & shm::kFlagUnreachable) == 0;
    c.timestampNs = v.timestampNs;
    ObservedState& o = c.observed;
    o.present = true;
    o.timestampMs = static_cast<double>(v.timestampNs) / 1e6;
    o.running = v.running;
    o.waiting = v.waiting;
    o.kvBlocksUsed = static_cast<double>(v.kvBlocksUsed);
    o.kvBlocksTotal = static_cast<double>(v.kvBlocksTotal);
    o.pendingPrefillTokens = static_cast<double>(v.pendingPrefillTokens);
    o.maxPrefillRemaining = static_cast<double>(v.maxPrefillRemaining);
    o.decodeBatch = v.decodeBatch;
  }
  // The timestamp came from shared memory: snapshotFresh() cannot overflow on
  // any value, and one from the future (beyond a small skew) is not fresh.
  if (!c.usable || !shm::snapshotFresh(c.timestampNs, nowNs, feedStaleNs_)) return nullptr;
  return &c.observed;
}

double Router::now() const {
  if (config_.manualClock) return manualNowMs_;
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) * 1000.0 + static_cast<double>(ts.tv_nsec) / 1e6;
}

uint32_t Router::addInstance(const std::string& name, uint64_t capacityBlocks) {
  uint32_t slot = 0;
  while (slot < instances_.size() && instances_[slot].live) ++slot;
  if (slot == instances_.size()) instances_.emplace_back();
  Instance& inst = instances_[slot];
  const uint32_t generation = inst.generation;
  inst = Instance();
  inst.generation = generation;
  inst.live = true;
  inst.name = name;
  inst.index = std::make_unique<BlockIndex>(capacityBlocks);
  if (slot < FleetIndex::kMaxInstances) inst.index->attachFleet(&fleet_, slot);
  events_.reset(slot);
  eff_.resize(instances_.size());
  peerLoad_.resize(instances_.size());
  uncached_.resize(instances_.size());
  capacity_.resize(instances_.size());
  costs_.resize(instances_.size());
  refreshLiveList();
  rebuildRing();
  return slot;
}

void Router::drainInstance(uint32_t slot, bool drained) {
  instances_[slot].drained = drained;
  refreshLiveList();
}

void Router::removeInstance(uint32_t slot) {
  Instance& inst = instances_[slot];
  if (inst.observed.present) --observedCount_;
  if (hasLoad(peerLoad_[slot])) --peerCount_;
  peerLoad_[slot] = ShadowCounters();
  const uint32_t generation = inst.generation + 1;
  inst = Instance();
  inst.generation = generation;
  events_.reset(slot);
  warmPairs_.forget(slot);
  refreshLiveList();
  rebuildRing();
}

void Router::setInstanceGroups(uint32_t slot, bool wildcard, const uint32_t* groups, uint32_t n) {
  Instance& inst = instances_[slot];
  inst.wildcard = wildcard;
  inst.groups.assign(groups, groups + (wildcard ? 0 : n));
  std::sort(inst.groups.begin(), inst.groups.end());
  inst.groups.erase(std::unique(inst.groups.begin(), inst.groups.end()), inst.groups.end());
  if (!inst.groups.empty() && inst.groups.back() >= groups_.size()) groups_.resize(inst.groups.back() + 1);
  refreshLiveList();
}

void Router::setInstanceCosts(uint32_t slot, const InstanceCosts* costs) {
  Instance& inst = instances_[slot];
  inst.hasCosts = costs != nullptr;
  inst.costs = costs != nullptr ? *costs : InstanceCosts();
}

void Router::refreshLiveList() {
  liveSlots_.clear();
  untrackedSlots_.clear();
  untrackedIndexes_.clear();
  trackedMask_ = 0;
  bySlot_.assign(std::min<size_t>(instances_.size(), FleetIndex::kMaxInstances), nullptr);
  for (uint32_t s = 0; s < instances_.size(); ++s) {
    if (!instances_[s].live) continue;
    liveSlots_.push_back(s);
    if (s < FleetIndex::kMaxInstances) {
      trackedMask_ |= uint64_t{1} << s;
      bySlot_[s] = instances_[s].index.get();
    } else {
      untrackedSlots_.push_back(s);
      untrackedIndexes_.push_back(instances_[s].index.get());
    }
  }
  liveMatched_.assign(untrackedSlots_.size(), 0);
  // Candidate sets; cursors stay where they were.
  const size_t count = instances_.size();
  routable_.slots.clear();
  routable_.member.assign(count, 0);
  for (CandidateSet& c : groups_) {
    c.slots.clear();
    c.member.assign(count, 0);
  }
  auto enter = [](CandidateSet& c, uint32_t s) {
    c.slots.push_back(s);
    c.member[s] = 1;
  };
  for (uint32_t s : liveSlots_) {
    const Instance& inst = instances_[s];
    if (inst.drained) continue;
    enter(routable_, s);
    if (inst.wildcard) {
      for (CandidateSet& c : groups_) enter(c, s);
    } else {
      for (uint32_t g : inst.groups) enter(groups_[g], s);
    }
  }
}

void Router::setPolicy(const PolicyConfig& policy) {
  const bool ringChanged = policy.ringVnodes != config_.policy.ringVnodes;
  config_.policy = policy;
  policy_ = &policyFor(policy.kind);
  if (ringChanged) rebuildRing();
}

void Router::effective(uint32_t slot, double nowMs, EffectiveState& out) const {
  const Instance& inst = instances_[slot];
  effectiveStateInto(out, inst.shadow, peerOf(slot), inst.observed, isFresh(inst.observed, nowMs, config_.stalenessMs),
                     static_cast<double>(inst.index->capacity()));
}

void Router::match(const uint64_t* ids, uint32_t n, int32_t* matched) {
  std::fill(matched, matched + instances_.size(), -1);
  matchFleet(fleet_, trackedMask_, bySlot_.data(), ids, n, matched);
  if (untrackedSlots_.empty()) return;
  matchMany(untrackedIndexes_.data(), untrackedIndexes_.size(), ids, n, liveMatched_.data());
  for (size_t k = 0; k < untrackedSlots_.size(); ++k) matched[untrackedSlots_[k]] = liveMatched_[k];
}

uint32_t Router::eventMatchLimit(const RouteInput& in) {
  const double cap = in.inputTokens >= 1 ? std::floor((in.inputTokens - 1) / in.blockTokens) : 0;
  return cap < static_cast<double>(in.n) ? static_cast<uint32_t>(cap) : in.n;
}

void Router::matchRequest(const RouteInput& in, int32_t* matched) {
  match(in.ids, in.n, matched);
  if (in.tokenKeys && events_.anyFed()) events_.match(in.ids, eventMatchLimit(in), matched);
}

int32_t Router::roundRobin(bool dryRun) {
  // Each candidate set has its own cursor, so one group's requests never move
  // where another's go next.
  CandidateSet& c = *cand_;
  const uint32_t count = static_cast<uint32_t>(instances_.size());
  for (uint32_t step = 0; step < count; ++step) {
    const uint32_t s = (c.cursor + step) % count;
    if (c.member[s] == 0) continue;
    if (!dryRun) c.cursor = (s + 1) % count;
    return static_cast<int32_t>(s);
  }
  return -1;
}

RouteOutput Router::route(const RouteInput& in, int32_t* matched, double* scores, double* terms) {
  // The clock matters only for observed-state freshness.
  const double nowMs = observedCount_ > 0 ? now() : 0;
  int64_t feedNowNs = 0;
  if (feed_) {
    // The snapshots' ages are on the wall clock (their writers stamp them with
    // it; ms resolution is plenty against a staleness of seconds); the re-check
    // schedule is on the monotonic clock, which no clock step can stop.
    feedNowNs = shm::realtimeCoarseNs();
    feed_->refreshAt(shm::monotonicCoarseNs());  // a stat at most every feedRecheckMs
  }
  matchRequest(in, matched);
  std::fill(scores, scores + instances_.size(), NAN);
  // The request's candidates, picked once; everything below ranges over them.
  cand_ = in.group < 0 ? &routable_ : &groups_[static_cast<uint32_t>(in.group)];
  // One pass over the candidates: state, uncached tokens; then the policy's scores.
  for (uint32_t s : cand_->slots) {
    EffectiveState& e = eff_[s];
    const Instance& inst = instances_[s];
    const double capacity = static_cast<double>(inst.index->capacity());
    capacity_[s] = capacity;
    // A fresh feed snapshot stands in for the instance's own observed one.
    const ObservedState* fed = feed_ ? readFeed(s, feedNowNs) : nullptr;
    if (fed != nullptr) {
      effectiveStateInto(e, inst.shadow, peerOf(s), *fed, true, capacity);
    } else {
      effectiveStateInto(e, inst.shadow, peerOf(s), inst.observed,
                         observedCount_ > 0 && isFresh(inst.observed, nowMs, config_.stalenessMs), capacity);
    }
    const double cachedTokens = static_cast<double>(matched[s]) * in.blockTokens;
    const double uncached = in.inputTokens > cachedTokens ? in.inputTokens - cachedTokens : 0;
    uncached_[s] = uncached;
    CostTerms& c = costs_[s];
    c.secondsPerToken = inst.hasCosts ? inst.costs.secondsPerToken : 1.0;
    c.overheadSeconds = inst.hasCosts ? inst.costs.overheadSeconds : 0.0;
    c.interference =
        inst.hasCosts && !std::isnan(inst.costs.interference) ? inst.costs.interference : config_.policy.batchWeight;
    c.returningTokens = inst.returningTokens;
    if (terms != nullptr) {
      double* t = terms + kTermCount * s;
      t[kTermPendingPrefill] = e.pendingPrefill;
      t[kTermRequests] = e.numRequests;
      t[kTermKvUsage] = e.kvUsage;
      t[kTermUncached] = uncached;
      t[kTermReturning] = c.returningTokens;
      t[kTermSecondsPerToken] = c.secondsPerToken;
      t[kTermOverhead] = c.overheadSeconds;
      t[kTermInterference] = c.interference;
    }
  }
  matched_ = matched;
  DecisionContext ctx{
      in,     config_.policy, cand_->slots, eff_.data(), matched, uncached_.data(), capacity_.data(), costs_.data(),
      scores, *this};
  policy_->score(ctx);
  const Decision decision = decide(ctx);
  RouteOutput out;
  out.slot = decision.slot;
  out.reason = decision.reason;
  // Without the layer this costs one load and a branch: the result is reset
  // only after a route that had one.
  if (lastOffload_.outcome != OffloadOutcome::kOff) lastOffload_ = OffloadResult();
  if (config_.policy.offload && out.slot >= 0) {
    lastOffload_ = decideOffload(config_.policy.offloadCost, static_cast<uint32_t>(out.slot), cand_->slots, eff_,
                                 uncached_, in.inputTokens, warmPairs_);
  }
  if (out.slot < 0 || in.dryRun) return out;

  const uint32_t target = static_cast<uint32_t>(out.slot);
  reasonCounts_[static_cast<size_t>(out.reason)] += 1;
  if (lastOffload_.outcome != OffloadOutcome::kOffload) {
    out.ticket = dispatch(in, target, static_cast<int64_t>(uncached_[target]));
    return out;
  }
  // Offload: the target decodes (its KV arrives by transfer, no prefill
  // queued there); the prefill instance carries the prefill.
  const uint32_t prefill = static_cast<uint32_t>(lastOffload_.prefillSlot);
  out.ticket = dispatch(in, target, 0);
  lastOffload_.prefillTicket = dispatch(in, prefill, static_cast<int64_t>(uncached_[prefill]));
  warmPairs_.mark(prefill, target);
  return out;
}

double Router::dispatch(const RouteInput& in, uint32_t slot, int64_t uncachedTokens) {
  Instance& inst = instances_[slot];
  // An event-fed slot's matched[] is the engine's truth; commit needs the
  // belief index's own match.
  const uint32_t believed =
      in.tokenKeys && events_.fed(slot) ? inst.index->match(in.ids, in.n) : static_cast<uint32_t>(matched_[slot]);
  inst.index->commit(in.ids, in.n, believed);
  InFlight request;
  request.slot = slot;
  request.slotGeneration = inst.generation;
  request.uncachedTokens = uncachedTokens;
  request.blocks = in.n;
  inst.shadow.waiting += 1;
  inst.shadow.prefillTokens += request.uncachedTokens;
  inst.shadow.activeBlocks += request.blocks;
  inst.routed += 1;
  const double ticket = tickets_.open(request);
  // The engine stores the prompt's blocks only as it computes them: until the
  // request finishes, its keys count as held there (event-index.h).
  if (in.tokenKeys && events_.fed(slot)) events_.holdInFlight(slot, ticket, in.ids, in.n);
  return ticket;
}

Decision Router::decide(DecisionContext& ctx) {
  const RouteInput& in = ctx.in;
  if (!config_.policy.ringFirstTurn || !in.hasSession || !policy_->readsRingFirstTurn()) return policy_->decide(ctx);
  // Copy what the entry says now: the policy (sticky) may touch the table.
  const uint64_t key = pinKey(in.sessionKey, in.group);
  const SessionPin* entry = findPin(key, in.dryRun);
  const bool known = entry != nullptr && honoured(*entry);
  const uint32_t knownSlot = known ? entry->slot : 0;
  Decision out;
  if (known) {
    out = policy_->decide(ctx);
  } else {
    // The ring depends only on the instance ids and the candidates, so every
    // replica with the same fleet sends this turn to the same instance.
    out.slot = ringLookup(in.sessionKey);
    out.reason = Reason::kRingFirstTurn;
  }
  if (out.slot >= 0 && !in.dryRun && (!known || static_cast<uint32_t>(out.slot) != knownSlot)) {
    pin(key, static_cast<uint32_t>(out.slot));
  }
  return out;
}

int32_t Router::ringLookup(uint64_t key) {
  if (ringStale_) {
    std::vector<std::string> names(instances_.size());
    std::vector<bool> live(instances_.size());
    for (size_t s = 0; s < instances_.size(); ++s) {
      names[s] = instances_[s].name;
      live[s] = instances_[s].live;
    }
    ring_.rebuild(names, live, config_.policy.ringVnodes);
    ringStale_ = false;
  }
  const uint8_t* member = cand_->member.data();
  return ring_.lookup(key, [member](uint32_t s) { return member[s] != 0; });
}

bool Router::onTicket(double ticket, TicketEvent event) {
  InFlight* r = tickets_.find(ticket);
  if (r == nullptr) return false;
  // The instance may have been removed since dispatch; then there is nothing
  // left to undo on it.
  Instance* inst =
      isLive(r->slot) && instances_[r->slot].generation == r->slotGeneration ? &instances_[r->slot] : nullptr;
  if (event == TicketEvent::kFirstToken) {
    if (!r->decoding) {
      r->decoding = true;
      if (inst != nullptr) {
        inst->shadow.waiting -= 1;
        inst->shadow.prefillTokens -= r->uncachedTokens;
        inst->shadow.running += 1;
      }
    }
    return true;
  }
  if (inst != nullptr) {
    if (r->decoding) {
      inst->shadow.running -= 1;
    } else {
      inst->shadow.waiting -= 1;
      inst->shadow.prefillTokens -= r->uncachedTokens;
    }
    inst->shadow.activeBlocks -= r->blocks;
    if (event == TicketEvent::kComplete) {
      inst->completed += 1;
    } else {
      inst->aborted += 1;
    }
  }
  events_.releaseInFlight(ticket);
  tickets_.close(ticket);
  return true;
}

void Router::setObserved(uint32_t slot, const ObservedState& observed) {
  observedCount_ += (observed.present ? 1 : 0) - (instances_[slot].observed.present ? 1 : 0);
  instances_[slot].observed = observed;
}

void Router::setPeerLoad(uint32_t slot, const ShadowCounters& peer) {
  peerCount_ += (hasLoad(peer) ? 1 : 0) - (hasLoad(peerLoad_[slot]) ? 1 : 0);
  peerLoad_[slot] = peer;
}

void Router::pinSession(uint64_t sessionKey, int32_t group, uint32_t slot) { pin(pinKey(sessionKey, group), slot); }

InstanceStats Router::stats(uint32_t slot) const {
  const Instance& inst = instances_[slot];
  InstanceStats st;
  st.capacityBlocks = inst.index->capacity();
  st.blocks = inst.index->blocks();
  st.segments = inst.index->segments();
  st.bytes = inst.index->bytes();
  st.shadow = inst.shadow;
  st.peer = peerLoad_[slot];
  const double nowMs = now();
  st.observedFresh = isFresh(inst.observed, nowMs, config_.stalenessMs);
  effective(slot, nowMs, st.effective);
  st.routed = inst.routed;
  st.completed = inst.completed;
  st.aborted = inst.aborted;
  return st;
}

uint64_t Router::removeBlocks(uint32_t slot, const uint64_t* ids, uint32_t n) {
  return instances_[slot].index->remove(ids, n);
}

void Router::clearBlocks(uint32_t slot) { instances_[slot].index->clear(); }

uint64_t Router::setCapacity(uint32_t slot, uint64_t capacityBlocks) {
  return instances_[slot].index->setCapacity(capacityBlocks);
}

std::string Router::checkInvariants() const {
  std::vector<ShadowCounters> expected(instances_.size());
  tickets_.forEachOpen([&](const InFlight& r) {
    if (!isLive(r.slot) || instances_[r.slot].generation != r.slotGeneration) return;
    ShadowCounters& e = expected[r.slot];
    if (r.decoding) {
      e.running += 1;
    } else {
      e.waiting += 1;
      e.prefillTokens += r.uncachedTokens;
    }
    e.activeBlocks += r.blocks;
  });
  uint32_t withPeerLoad = 0;
  for (uint32_t s = 0; s < instances_.size(); ++s) withPeerLoad += instances_[s].live && hasLoad(peerLoad_[s]) ? 1 : 0;
  if (withPeerLoad != peerCount_) return "peerCount_ disagrees with the instances' peer load";
  for (uint32_t s = 0; s < instances_.size(); ++s) {
    if (!instances_[s].live) continue;
    const ShadowCounters& a = instances_[s].shadow;
    const ShadowCounters& e = expected[s];
    if (a.running != e.running || a.waiting != e.waiting || a.prefillTokens != e.prefillTokens ||
        a.activeBlocks != e.activeBlocks) {
      std::ostringstream err;
      err << "slot " << s << ": shadow counters disagree with open tickets";
      return err.str();
    }
    std::string indexError = instances_[s].index->checkInvariants();
    if (!indexError.empty()) return "slot " + std::to_string(s) + ": " + indexError;
  }
  // Every fleet bit belongs to a strided block its instance holds (each
  // index checked its own blocks are in the fleet; count the rest).
  size_t reported = 0;
  for (uint32_t s : liveSlots_) {
    if (s < FleetIndex::kMaxInstances) reported += instances_[s].index->stridedBlocks();
  }
  if (fleet_.bits() != reported) {
    return "fleet index holds " + std::to_string(fleet_.bits()) + " bits, instances report " + std::to_string(reported);
  }
  // Every candidate set lists exactly its members, ascending, and its members
  // are exactly the routable instances serving its group.
  auto checkSet = [&](const CandidateSet& c, int64_t group) -> std::string {
    const std::string who = group < 0 ? "the routable set" : "group " + std::to_string(group);
    if (c.member.size() != instances_.size()) return who + ": membership is not sized to the slots";
    size_t members = 0;
    for (uint32_t s = 0; s < instances_.size(); ++s) {
      const Instance& inst = instances_[s];
      const bool serves = group < 0 || inst.wildcard ||
                          std::binary_search(inst.groups.begin(), inst.groups.end(), static_cast<uint32_t>(group));
      if ((c.member[s] != 0) != (routable(s) && serves)) {
        return who + ": slot " + std::to_string(s) + " membership is " + std::to_string(c.member[s]);
      }
      members += c.member[s] != 0 ? 1 : 0;
    }
    if (c.slots.size() != members) return who + ": lists " + std::to_string(c.slots.size()) + " slots";
    for (size_t k = 0; k < c.slots.size(); ++k) {
      if (c.member[c.slots[k]] == 0 || (k > 0 && c.slots[k - 1] >= c.slots[k])) {
        return who + ": slot list is not the ascending members";
      }
    }
    if (c.cursor >= std::max<size_t>(instances_.size(), 1)) return who + ": cursor out of range";
    return "";
  };
  for (uint32_t s = 0; s < instances_.size(); ++s) {
    if (events_.fed(s) && !instances_[s].live) return "slot " + std::to_string(s) + " is event-fed but not live";
  }
  const std::string eventError = events_.checkInvariants();
  if (!eventError.empty()) return eventError;
  std::string setError = checkSet(routable_, -1);
  for (uint32_t g = 0; g < groups_.size() && setError.empty(); ++g) setError = checkSet(groups_[g], g);
  for (uint32_t s = 0; s < instances_.size() && setError.empty(); ++s) {
    const std::vector<uint32_t>& gs = instances_[s].groups;
    if (!std::is_sorted(gs.begin(), gs.end()) || std::adjacent_find(gs.begin(), gs.end()) != gs.end() ||
        (!gs.empty() && gs.back() >= groups_.size()) || (instances_[s].wildcard && !gs.empty())) {
      setError = "slot " + std::to_string(s) + ": group list is not ascending, unique and known";
    }
  }
  return setError;
}

}  // namespace kvroute
