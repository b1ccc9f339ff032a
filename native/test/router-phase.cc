// The Router phases of core-test: kvroute::Router with a small fleet or one
// beyond FleetIndex::kMaxInstances (so both matchFleet and matchMany run),
// instances added / drained / removed / re-added, every policy, dry runs,
// ticket events, model groups that change mid-run. With `exact` (chained ids)
// route()'s matched[] is compared with one RefIndex per instance; without,
// only safety and the routing contract (a candidate or no slot) are asserted.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/router.h"
#include "harness.h"
#include "index-checks.h"
#include "phases.h"
#include "ref-index.h"
#include "rng.h"
#include "workload.h"

namespace core_test {

using kvroute::PolicyKind;
using kvroute::Router;

namespace {

struct SlotModel {
  bool live = false;
  bool drained = false;
  bool wildcard = true;          // serves any group
  std::vector<uint32_t> groups;  // otherwise these
  bool serves(int32_t group) const {
    return group < 0 || wildcard ||
           std::find(groups.begin(), groups.end(), static_cast<uint32_t>(group)) != groups.end();
  }
  uint64_t incarnation = 0;
  std::unique_ptr<RefIndex> ref;
  uint64_t routed = 0, completed = 0, aborted = 0;
};

struct TicketModel {
  double ticket;
  uint32_t slot;
  uint64_t incarnation;
  bool open;
};

kvroute::PolicyConfig randomPolicy(Rng& rng, int32_t kind) {
  kvroute::PolicyConfig p;
  p.kind = static_cast<PolicyKind>(kind);
  static const std::vector<double> thresholds = {0.0, 0.3, 0.5, 0.9, 1.0};
  static const std::vector<double> overloads = {1.0, 1.5, 2.0, 100.0};
  static const std::vector<double> decode = {0.0, 0.5, 1.0};
  static const std::vector<uint32_t> vnodes = {1, 8, 160};
  p.affinityThreshold = rng.pick(thresholds);
  p.overloadFactor = rng.pick(overloads);
  p.decodeWeight = rng.pick(decode);
  p.ringVnodes = rng.pick(vnodes);
  p.ringFirstTurn = rng.percent(50);
  // The offload layer on half the policies, with thresholds a short request
  // crosses and transfers cheap enough to win now and then.
  static const std::vector<double> offloadThresholds = {0.0, 100.0, 1000.0};
  static const std::vector<double> coldPenalties = {0.0, 140.0};
  p.offload = rng.percent(50);
  p.offloadCost.thresholdTokens = rng.pick(offloadThresholds);
  p.offloadCost.coldPenaltyMs = rng.pick(coldPenalties);
  p.offloadCost.layerwise = rng.percent(50);
  p.offloadCost.chargePrefill = rng.percent(50);
  return p;
}

}  // namespace

// Drives a Router, chained or not. With `exact`, every matched length and
// block count is compared with the per-instance models.
void routerPhase(uint64_t seed, uint32_t ops, bool largeFleet, bool exact, Totals& totals) {
  Rng rng(seed * 0xD1B54A32D192ED03ULL + (largeFleet ? 7 : 3) + (exact ? 0 : 100));
  Workload wl(rng, 0x7000 + seed * 4 + (largeFleet ? 1 : 0));
  GarbageWorkload garbage(rng, 0x9000 + seed * 4 + (largeFleet ? 1 : 0));
  kvroute::RouterConfig config;
  config.manualClock = true;
  config.maxSessions = rng.percent(50) ? 16 : 1u << 20;
  config.stalenessMs = 1000;
  int32_t kind = static_cast<int32_t>(rng.below(kvroute::kPolicyKindCount));
  config.policy = randomPolicy(rng, kind);
  Router router(config);
  double nowMs = 1e6;
  router.setTime(nowMs);

  std::vector<SlotModel> slots;
  std::vector<TicketModel> tickets;
  uint64_t incarnations = 0;
  uint64_t committed = 0;
  uint64_t openTickets = 0;
  uint64_t names = 0;

  auto liveSlots = [&]() {
    std::vector<uint32_t> out;
    for (uint32_t s = 0; s < slots.size(); ++s) {
      if (slots[s].live) out.push_back(s);
    }
    return out;
  };
  auto addInstance = [&]() {
    const uint64_t capacity = pickCapacity(rng);
    uint32_t expectedSlot = 0;
    while (expectedSlot < slots.size() && slots[expectedSlot].live) ++expectedSlot;
    // Names repeat now and then (a re-added instance keeps its ring points).
    const std::string name = "engine-" + std::to_string(rng.percent(20) && names > 0 ? rng.below(names) : names++);
    note(describe("addInstance", expectedSlot, 0, static_cast<int64_t>(capacity)));
    const uint32_t slot = router.addInstance(name, capacity);
    CHECK(slot == expectedSlot, "addInstance took slot " << slot << ", lowest free is " << expectedSlot);
    if (slot == slots.size()) slots.emplace_back();
    SlotModel& m = slots[slot];
    m = SlotModel();
    m.live = true;
    m.incarnation = ++incarnations;
    m.ref = std::make_unique<RefIndex>(capacity);
    CHECK(router.slotCount() == slots.size(), "slotCount " << router.slotCount());
    return slot;
  };
  // Random groups for a slot: any (wildcard), none, or one to three of 0..4
  // (duplicates included: the router drops them).
  auto setGroups = [&](uint32_t s) {
    SlotModel& m = slots[s];
    m.wildcard = rng.percent(30);
    m.groups.clear();
    const uint32_t count = m.wildcard || rng.percent(15) ? 0 : static_cast<uint32_t>(rng.range(1, 3));
    for (uint32_t k = 0; k < count; ++k) m.groups.push_back(static_cast<uint32_t>(rng.below(5)));
    note(describe("setInstanceGroups", s, count, m.wildcard ? 1 : 0));
    router.setInstanceGroups(s, m.wildcard, m.groups.data(), count);
    std::sort(m.groups.begin(), m.groups.end());
    m.groups.erase(std::unique(m.groups.begin(), m.groups.end()), m.groups.end());
    CHECK(router.isWildcard(s) == m.wildcard && router.instanceGroups(s) == m.groups, "slot " << s << ": groups");
  };
  auto checkSlot = [&](uint32_t s) {
    const SlotModel& m = slots[s];
    CHECK(router.isLive(s) == m.live, "slot " << s << ": isLive");
    if (!m.live) return;
    CHECK(router.isDrained(s) == m.drained, "slot " << s << ": isDrained");
    const kvroute::InstanceStats st = router.stats(s);
    CHECK(st.capacityBlocks == m.ref->capacity(), "slot " << s << ": capacity " << st.capacityBlocks);
    CHECK(st.blocks <= st.capacityBlocks, "slot " << s << ": " << st.blocks << " blocks over capacity");
    CHECK(st.routed == m.routed && st.completed == m.completed && st.aborted == m.aborted,
          "slot " << s << ": routed/completed/aborted " << st.routed << "/" << st.completed << "/" << st.aborted
                  << ", model " << m.routed << "/" << m.completed << "/" << m.aborted);
    if (exact)
      CHECK(st.blocks == m.ref->size(), "slot " << s << ": blocks " << st.blocks << ", model " << m.ref->size());
  };
  // Every model block held by the router's instance in slot s.
  auto fullCheck = [&](uint32_t s) {
    const SlotModel& m = slots[s];
    std::vector<int32_t> matched(router.slotCount());
    for (const std::vector<uint64_t>& path : m.ref->leafPaths()) {
      const uint32_t n = static_cast<uint32_t>(path.size());
      router.match(path.data(), n, matched.data());
      if (matched[s] != static_cast<int32_t>(n)) note("leaf path", path.data(), n);
      CHECK(matched[s] == static_cast<int32_t>(n),
            "slot " << s << ": the model holds a path of " << n << " blocks, router matched " << matched[s]);
    }
    ++totals.fullChecks;
  };
  auto routerInvariants = [&]() {
    const std::string err = router.checkInvariants();
    CHECK(err.empty(), "Router::checkInvariants(): " << err);
    CHECK(router.openTickets() == openTickets, "openTickets " << router.openTickets() << ", model " << openTickets);
  };

  const uint32_t initial =
      largeFleet ? static_cast<uint32_t>(rng.range(57, 61)) : static_cast<uint32_t>(rng.range(1, 6));
  for (uint32_t k = 0; k < initial; ++k) {
    const uint32_t s = addInstance();
    if (rng.percent(50)) setGroups(s);
  }
  routerInvariants();

  for (g.step = 1; g.step <= ops; ++g.step) {
    uint64_t r = rng.below(1000);
    const std::vector<uint32_t> live = liveSlots();
    std::vector<uint32_t> routable, drained;
    for (uint32_t s : live) (slots[s].drained ? drained : routable).push_back(s);
    // Keep the fleet alive: with nothing routable, add an instance more often
    // than not (a route then still checks the "no instance" answer sometimes).
    if (routable.empty() && rng.percent(60)) r = 820;
    const bool adding = r >= 810 && r < 830;
    if (r < 700 || (live.empty() && !adding)) {
      const Request req = exact ? wl.next() : garbage.next();
      const uint32_t n = static_cast<uint32_t>(req.ids.size());
      kvroute::RouteInput in;
      in.ids = req.ids.data();
      in.n = n;
      in.blockTokens = 16;
      in.inputTokens = std::max<double>(0, n * 16.0 - static_cast<double>(rng.below(16)));
      in.hasSession = rng.percent(80);
      in.sessionKey = req.session;
      in.group = rng.percent(40) ? -1 : static_cast<int32_t>(rng.below(router.groupCount()));
      in.dryRun = rng.percent(15);
      const bool matchOnly = rng.percent(5);
      note(std::string(matchOnly   ? "match"
                       : in.dryRun ? "route(dry)"
                                   : "route") +
               " policy=" + std::to_string(kind) + " group=" + std::to_string(in.group) +
               " session=" + (in.hasSession ? std::to_string(req.session) : "none"),
           req.ids.data(), n);
      std::vector<int32_t> matched(router.slotCount(), -9);
      std::vector<double> scores(router.slotCount(), -9);
      kvroute::RouteOutput out;
      if (matchOnly) {
        router.match(in.ids, n, matched.data());
      } else {
        out = router.route(in, matched.data(), scores.data());
      }
      size_t routable = 0;
      for (uint32_t s = 0; s < slots.size(); ++s) {
        const SlotModel& m = slots[s];
        if (!m.live) {
          CHECK(matched[s] == -1, "slot " << s << " (free): matched " << matched[s]);
          continue;
        }
        CHECK(matched[s] >= 0 && matched[s] <= static_cast<int32_t>(n),
              "slot " << s << ": matched " << matched[s] << " of " << n);
        if (exact) {
          const uint32_t want = m.ref->match(in.ids, n);
          CHECK(matched[s] == static_cast<int32_t>(want),
                "slot " << s << ": matched " << matched[s] << ", model " << want);
        }
        const bool candidate = !m.drained && m.serves(in.group);
        if (candidate) ++routable;
        if (!matchOnly && !candidate)
          CHECK(std::isnan(scores[s]), "slot " << s << " (not a candidate): score " << scores[s]);
      }
      if (matchOnly) continue;
      CHECK((out.slot >= 0) == (routable > 0),
            "route chose slot " << out.slot << " with " << routable << " candidates");
      if (out.slot < 0) {
        CHECK(out.ticket == -1, "ticket " << out.ticket << " without a slot");
        continue;
      }
      CHECK(out.reason != kvroute::Reason::kRingFirstTurn || (router.policy().ringFirstTurn && in.hasSession),
            "ring_first_turn without ringFirstTurn or a session");
      SlotModel& chosen = slots[out.slot];
      CHECK(chosen.live && !chosen.drained && chosen.serves(in.group),
            "route chose slot " << out.slot << ", which is not a candidate of group " << in.group);
      if (kind == static_cast<int32_t>(PolicyKind::kUnified) ||
          kind == static_cast<int32_t>(PolicyKind::kUnifiedKvBoth)) {
        if (out.reason == kvroute::Reason::kAffinity) {
          for (uint32_t s = 0; s < slots.size(); ++s) {
            if (slots[s].live && !slots[s].drained && slots[s].serves(in.group)) {
              CHECK(matched[out.slot] >= matched[s], "affinity chose slot " << out.slot << " (matched "
                                                                            << matched[out.slot] << ") over slot " << s
                                                                            << " (matched " << matched[s] << ")");
            }
          }
        }
      }
      const kvroute::OffloadResult& offload = router.lastOffload();
      const bool offloaded = offload.outcome == kvroute::OffloadOutcome::kOffload;
      CHECK(router.policy().offloadCost.chargePrefill || offload.extraPrefillMs == 0,
            "extra prefill " << offload.extraPrefillMs << " without chargePrefill");
      CHECK(router.policy().offload || offload.outcome == kvroute::OffloadOutcome::kOff,
            "offload outcome " << static_cast<int>(offload.outcome) << " without the layer");
      if (offloaded) {
        const uint32_t p = static_cast<uint32_t>(offload.prefillSlot);
        CHECK(p < slots.size() && p != static_cast<uint32_t>(out.slot) && slots[p].live && !slots[p].drained &&
                  slots[p].serves(in.group),
              "offload to prefill slot " << offload.prefillSlot << ", not another candidate");
        CHECK(offload.interferenceMs > offload.transferMs + std::max(0.0, offload.extraPrefillMs),
              "offload with interference " << offload.interferenceMs << " <= transfer " << offload.transferMs
                                           << " + extra " << offload.extraPrefillMs);
        CHECK((offload.prefillTicket >= 0) == !in.dryRun, "prefill ticket " << offload.prefillTicket);
      } else {
        CHECK(offload.prefillSlot == -1 && offload.prefillTicket == -1, "prefill slot/ticket without an offload");
      }
      if (in.dryRun) {
        CHECK(out.ticket == -1, "dry run returned ticket " << out.ticket);
        continue;
      }
      CHECK(out.ticket >= 0, "ticket " << out.ticket);
      // The decode target, and with an offload the prefill instance too.
      std::vector<std::pair<uint32_t, double>> dispatched = {{static_cast<uint32_t>(out.slot), out.ticket}};
      if (offloaded) {
        dispatched.emplace_back(static_cast<uint32_t>(offload.prefillSlot), offload.prefillTicket);
        CHECK(router.warmPairs().warm(static_cast<uint32_t>(offload.prefillSlot), static_cast<uint32_t>(out.slot)),
              "an offload left its pair cold");
        ++totals.offloads;
      }
      for (const auto& [slot, ticket] : dispatched) {
        SlotModel& m = slots[slot];
        if (exact) totals.evicted += m.ref->commit(in.ids, n, m.ref->match(in.ids, n));
        m.routed += 1;
        tickets.push_back(TicketModel{ticket, slot, m.incarnation, true});
        ++openTickets;
        checkSlot(slot);
      }
      ++committed;  // one decision, counted once by its reason
      ++totals.commits;
    } else if (r < 790) {
      if (tickets.empty()) continue;
      // A ticket event; closed tickets are refused.
      const size_t k = tickets.size() - 1 - rng.below(std::min<size_t>(tickets.size(), 64));
      TicketModel& t = tickets[k];
      const auto event = static_cast<kvroute::TicketEvent>(rng.below(3));
      note("onTicket event=" + std::to_string(static_cast<int>(event)) + " ticket=" + std::to_string(t.ticket) +
           (t.open ? " (open)" : " (closed)"));
      const bool ok = router.onTicket(t.ticket, event);
      CHECK(ok == t.open, "onTicket returned " << ok << " for a ticket that is " << (t.open ? "open" : "closed"));
      if (t.open && event != kvroute::TicketEvent::kFirstToken) {
        t.open = false;
        --openTickets;
        SlotModel& m = slots[t.slot];
        if (m.live && m.incarnation == t.incarnation) {
          (event == kvroute::TicketEvent::kComplete ? m.completed : m.aborted) += 1;
        }
      }
      if (tickets.size() > 4096) {
        tickets.erase(std::remove_if(tickets.begin(), tickets.end(), [](const TicketModel& x) { return !x.open; }),
                      tickets.end());
      }
    } else if (r < 810) {
      kind = (kind + 1) % kvroute::kPolicyKindCount;
      note("setPolicy kind=" + std::to_string(kind));
      router.setPolicy(randomPolicy(rng, kind));
    } else if (r < 830) {
      if (slots.size() >= 64 && live.size() == slots.size()) continue;
      const uint32_t s = addInstance();
      if (rng.percent(70)) setGroups(s);
    } else if (r < 845) {
      // Drained instances are removed first, as an operator would.
      const uint32_t s = !drained.empty() && rng.percent(60) ? rng.pick(drained) : rng.pick(live);
      note(describe("removeInstance", s, 0));
      router.removeInstance(s);
      slots[s].live = false;
      slots[s].ref.reset();
    } else if (r < 860) {
      if (routable.size() < 2 && rng.percent(90)) continue;
      const uint32_t s = rng.pick(live);
      note(describe("drainInstance", s, 0));
      router.drainInstance(s);
      slots[s].drained = true;
    } else if (r < 900) {
      const uint32_t s = rng.pick(live);
      std::vector<uint64_t> list;
      const std::vector<uint64_t> held = slots[s].ref->heldIds();
      const uint32_t count = static_cast<uint32_t>(rng.range(0, 5));
      for (uint32_t k = 0; k < count; ++k) {
        const uint64_t pickKind = rng.below(10);
        if (!exact && pickKind < 4) {
          list.push_back(garbage.anyId());
        } else if (pickKind < 6 && !held.empty()) {
          list.push_back(rng.pick(held));
        } else {
          list.push_back(pickKind < 9 ? wl.recentId() : wl.fresh());
        }
      }
      note(describe("removeBlocks", s, count), list.data(), count);
      const uint64_t removed = router.removeBlocks(s, list.data(), count);
      if (exact) {
        const uint64_t want = slots[s].ref->remove(list.data(), count);
        CHECK(removed == want, "slot " << s << ": removeBlocks = " << removed << ", model " << want);
      }
      totals.removed += removed;
    } else if (r < 925) {
      const uint32_t s = rng.pick(live);
      const uint64_t capacity = pickCapacity(rng);
      note(describe("setCapacity", s, 0, static_cast<int64_t>(capacity)));
      const uint64_t evicted = router.setCapacity(s, capacity);
      const uint64_t want = slots[s].ref->setCapacity(capacity);
      if (exact) CHECK(evicted == want, "slot " << s << ": setCapacity evicted " << evicted << ", model " << want);
    } else if (r < 930) {
      const uint32_t s = rng.pick(live);
      note(describe("clearBlocks", s, 0));
      router.clearBlocks(s);
      slots[s].ref->clear();
    } else if (r < 960) {
      const uint32_t s = rng.pick(live);
      kvroute::ObservedState o;
      o.present = rng.percent(85);
      o.timestampMs = nowMs - static_cast<double>(rng.below(1500));
      auto maybe = [&](double v) { return rng.percent(20) ? NAN : v; };
      o.running = maybe(static_cast<double>(rng.below(8)));
      o.waiting = maybe(static_cast<double>(rng.below(8)));
      o.kvBlocksTotal = maybe(static_cast<double>(rng.below(3) * 500));
      o.kvBlocksUsed = maybe(static_cast<double>(rng.below(500)));
      o.pendingPrefillTokens = maybe(static_cast<double>(rng.below(20000)));
      o.maxPrefillRemaining = maybe(static_cast<double>(rng.below(4000)));
      o.decodeBatch = maybe(static_cast<double>(rng.below(8)));
      note(describe("setObserved", s, 0, o.present));
      router.setObserved(s, o);
    } else if (r < 980) {
      nowMs += static_cast<double>(rng.below(600));
      router.setTime(nowMs);
    } else if (r < 990) {
      setGroups(rng.pick(live));
    } else {
      const uint32_t s = rng.pick(live);
      note(describe("full check", s, 0));
      if (exact) fullCheck(s);
    }
    // Checks after every operation (cheap) and every few (whole router).
    for (uint32_t s : live) {
      if (s < slots.size() && (g.step + s) % 8 == 0) checkSlot(s);
    }
    if (g.step % (largeFleet ? 8 : 2) == 0) routerInvariants();
    if (exact && g.step % 40 == 0) {
      const std::vector<uint32_t> now = liveSlots();
      if (!now.empty()) fullCheck(rng.pick(now));
    }
  }
  ++g.step;
  note("final check");
  routerInvariants();
  uint64_t reasons = 0;
  for (uint64_t c : router.reasonCounts()) reasons += c;
  CHECK(reasons == committed, "reason counts sum to " << reasons << ", routes committed " << committed);
  for (uint32_t s = 0; s < slots.size(); ++s) {
    checkSlot(s);
    if (exact && slots[s].live) fullCheck(s);
  }
  totals.ops += ops;
}

}  // namespace core_test
