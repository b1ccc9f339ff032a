// Directed BlockIndex and Router cases for core-test: a request longer than
// the capacity, remove() inside a segment, a split at a non-strided depth then
// eviction of the tail, n = 0 everywhere, ringFirstTurn across two replicas,
// shrink to 0 and clear() with a fleet attached; and the smallest non-chained
// sequences the garbage phases found to break the index (consistency only).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/block-index.h"
#include "core/fleet-index.h"
#include "core/match-many.h"
#include "core/router.h"
#include "harness.h"
#include "index-checks.h"
#include "phases.h"
#include "ref-index.h"

namespace core_test {

using kvroute::BlockIndex;
using kvroute::FleetIndex;
using kvroute::PolicyKind;
using kvroute::Router;

namespace {

std::vector<uint64_t> chain(uint64_t from, uint32_t n, std::vector<uint64_t> prefix = {}) {
  for (uint32_t k = 0; k < n; ++k) prefix.push_back(from + k);
  return prefix;
}

}  // namespace

void directedCases() {
  g.phase = "directed";
  g.seed = 0;
  g.step = 0;
  g.trail.clear();

  // A request longer than the capacity keeps its first `capacity` blocks, at
  // capacities around the stride.
  for (uint64_t capacity : {0u, 1u, 15u, 16u, 17u, 25u, 32u, 33u, 100u, 150u}) {
    ++g.step;
    note(describe("long request", 0, 150, static_cast<int64_t>(capacity)));
    BlockIndex index(capacity);
    RefIndex ref(capacity);
    const std::vector<uint64_t> ids = chain(1, 150);
    const uint64_t evicted = index.commit(ids.data(), 150, 0);
    CHECK(evicted == 150 - std::min<uint64_t>(capacity, 150), "capacity " << capacity << ": evicted " << evicted);
    CHECK(index.match(ids.data(), 150) == std::min<uint64_t>(capacity, 150),
          "capacity " << capacity << ": match " << index.match(ids.data(), 150));
    ref.commit(ids.data(), 150, 0);
    checkIndexInvariants(index, "long");
    checkSameBlocks(index, ref, "long");
  }

  // remove() of a block deep inside a segment removes exactly it and every
  // block below it, including branches and at strided / head / plain depths.
  for (uint32_t at : {1u, 7u, 15u, 16u, 17u, 37u, 48u, 49u, 63u, 64u, 99u}) {
    ++g.step;
    BlockIndex index(1000);
    RefIndex ref(1000);
    const std::vector<uint64_t> trunk = chain(1, 100);
    const std::vector<uint64_t> branch = chain(5000, 20, std::vector<uint64_t>(trunk.begin(), trunk.begin() + 50));
    note(describe("remove inside a segment", 0, 100, at), trunk.data(), 100);
    for (const std::vector<uint64_t>* r : {&trunk, &branch}) {
      const uint32_t n = static_cast<uint32_t>(r->size());
      index.commit(r->data(), n, index.match(r->data(), n));
      ref.commit(r->data(), n, ref.match(r->data(), n));
    }
    const uint64_t id = trunk[at];
    const uint64_t expected = (100 - at) + (at < 50 ? 20 : 0);
    const uint64_t removed = index.remove(&id, 1);
    CHECK(removed == expected, "remove at depth " << at << ": removed " << removed << ", expected " << expected);
    CHECK(ref.remove(&id, 1) == expected, "model remove at depth " << at);
    CHECK(index.match(trunk.data(), 100) == at, "trunk match after remove at " << at);
    const uint32_t branchMatch = index.match(branch.data(), 70);
    CHECK(branchMatch == (at < 50 ? at : 70), "branch match " << branchMatch << " after remove at " << at);
    CHECK(index.remove(&id, 1) == 0, "removing it again");
    checkIndexInvariants(index, "remove");
    checkSameBlocks(index, ref, "remove");
  }

  // A split at a non-strided depth, then eviction of the tail: first part of
  // it, then exactly all of it, then more; then the head extends again.
  for (uint32_t split : {1u, 5u, 15u, 17u, 21u, 31u, 33u}) {
    ++g.step;
    note(describe("split then evict the tail", 0, 40, split));
    const uint64_t capacity = 40;
    BlockIndex index(capacity);
    RefIndex ref(capacity);
    auto run = [&](const std::vector<uint64_t>& ids) {
      const uint32_t n = static_cast<uint32_t>(ids.size());
      const uint32_t m = index.match(ids.data(), n);
      CHECK(m == ref.match(ids.data(), n), "split " << split << ": match " << m);
      const uint64_t e = index.commit(ids.data(), n, m);
      CHECK(e == ref.commit(ids.data(), n, m), "split " << split << ": evicted " << e);
      checkIndexInvariants(index, "split");
      checkSameBlocks(index, ref, "split");
    };
    const std::vector<uint64_t> a = chain(1, 40);
    run(a);
    run(std::vector<uint64_t>(a.begin(), a.begin() + split));  // split before `split`; the tail is older
    const uint32_t tail = 40 - split;
    run(chain(1000, tail / 2));  // evicts half the tail
    CHECK(index.match(a.data(), 40) == 40 - tail / 2, "split " << split << ": half the tail evicted");
    run(std::vector<uint64_t>(a.begin(), a.begin() + split));
    run(chain(2000, tail - tail / 2));  // evicts exactly the rest of the tail
    CHECK(index.match(a.data(), 40) == split,
          "split " << split << ": tail fully evicted, match " << index.match(a.data(), 40));
    run(a);  // extends the head's run again (it has no child left)
    CHECK(index.match(a.data(), 40) == 40, "split " << split << ": re-extended");
  }

  // An empty request: matches nothing everywhere and commits nothing.
  {
    ++g.step;
    note("empty request");
    FleetIndex fleet;
    BlockIndex index(10);
    index.attachFleet(&fleet, 3);
    const std::vector<uint64_t> ids = chain(1, 5);
    index.commit(ids.data(), 5, 0);
    const std::vector<uint64_t> empty;
    CHECK(index.match(empty.data(), 0) == 0, "match of n = 0");
    CHECK(index.commit(empty.data(), 0, 0) == 0, "commit of n = 0");
    CHECK(index.blocks() == 5, "blocks after an empty commit");
    const BlockIndex* all[] = {&index};
    int32_t out[1] = {-5};
    kvroute::matchMany(all, 1, empty.data(), 0, out);
    CHECK(out[0] == 0, "matchMany of n = 0: " << out[0]);
    const BlockIndex* bySlot[FleetIndex::kMaxInstances] = {};
    bySlot[3] = &index;
    int32_t matched[FleetIndex::kMaxInstances];
    std::fill(matched, matched + FleetIndex::kMaxInstances, -5);
    kvroute::matchFleet(fleet, uint64_t{1} << 3, bySlot, empty.data(), 0, matched);
    CHECK(matched[3] == 0 && matched[2] == -5, "matchFleet of n = 0");
    checkIndexInvariants(index, "empty");

    kvroute::RouterConfig config;
    config.manualClock = true;
    Router router(config);
    router.addInstance("a", 10);
    router.addInstance("b", 10);
    for (int32_t kind = 0; kind < kvroute::kPolicyKindCount; ++kind) {
      kvroute::PolicyConfig policy;
      policy.kind = static_cast<PolicyKind>(kind);
      router.setPolicy(policy);
      for (bool hasSession : {false, true}) {
        kvroute::RouteInput in;
        in.ids = empty.data();
        in.n = 0;
        in.hasSession = hasSession;
        in.sessionKey = 7;
        int32_t m[2];
        double scores[2];
        const kvroute::RouteOutput out = router.route(in, m, scores);
        CHECK(out.slot >= 0 && m[0] == 0 && m[1] == 0, "route of n = 0, policy " << kind);
      }
    }
    CHECK(router.checkInvariants().empty(), router.checkInvariants());
  }

  // ringFirstTurn: two replicas that added the same instances in opposite
  // orders (so different slots) and carry different loads send every new
  // session to the same instance by name; a session a replica has placed
  // follows the policy there.
  {
    ++g.step;
    note("ringFirstTurn across two replicas");
    const std::vector<std::string> names = {"e0", "e1", "e2", "e3", "e4"};
    kvroute::RouterConfig config;
    config.manualClock = true;
    config.policy.kind = PolicyKind::kMinTtft;
    config.policy.ringFirstTurn = true;
    Router a(config);
    Router b(config);
    for (size_t k = 0; k < names.size(); ++k) {
      a.addInstance(names[k], 100);
      b.addInstance(names[names.size() - 1 - k], 100);
    }
    const std::vector<uint64_t> ids = {11, 12, 13};
    std::vector<int32_t> m(names.size());
    std::vector<double> scores(names.size());
    kvroute::RouteInput load;
    load.ids = ids.data();
    load.n = 3;
    load.inputTokens = 48;
    for (int k = 0; k < 3; ++k) b.route(load, m.data(), scores.data());  // no session: placed by load
    std::vector<bool> used(names.size(), false);
    for (uint64_t session = 1; session <= 200; ++session) {
      kvroute::RouteInput in = load;
      in.hasSession = true;
      in.sessionKey = session * 0x9E3779B97F4A7C15ULL;
      const kvroute::RouteOutput ra = a.route(in, m.data(), scores.data());
      const kvroute::RouteOutput rb = b.route(in, m.data(), scores.data());
      CHECK(
          ra.reason == kvroute::Reason::kRingFirstTurn && rb.reason == kvroute::Reason::kRingFirstTurn,
          "session " << session << ": reasons " << static_cast<int>(ra.reason) << ", " << static_cast<int>(rb.reason));
      CHECK(ra.slot >= 0 && rb.slot == static_cast<int32_t>(names.size()) - 1 - ra.slot,
            "session " << session << ": replica a chose slot " << ra.slot << ", b slot " << rb.slot);
      used[ra.slot] = true;
      const kvroute::RouteOutput again = a.route(in, m.data(), scores.data());
      CHECK(again.reason != kvroute::Reason::kRingFirstTurn, "session " << session << ": ring placed it twice");
    }
    CHECK(std::count(used.begin(), used.end(), true) == static_cast<long>(names.size()),
          "200 sessions did not reach every instance");
    CHECK(a.sessionCount() == 200 && b.sessionCount() == 200,
          "entries " << a.sessionCount() << ", " << b.sessionCount());
    CHECK(a.checkInvariants().empty() && b.checkInvariants().empty(), a.checkInvariants() << b.checkInvariants());
  }

  // A shrink to zero and a clear with a fleet attached leave no fleet bits.
  {
    ++g.step;
    note("shrink to 0, clear");
    FleetIndex fleet;
    {
      BlockIndex index(500);
      index.attachFleet(&fleet, 55);
      const std::vector<uint64_t> ids = chain(1, 300);
      index.commit(ids.data(), 300, 0);
      CHECK(fleet.bits() == index.stridedBlocks() && fleet.bits() == 19, "fleet bits " << fleet.bits());
      CHECK(index.setCapacity(0) == 300, "setCapacity(0)");
      CHECK(fleet.bits() == 0 && fleet.size() == 0, "fleet bits after shrink " << fleet.bits());
      index.setCapacity(500);
      index.commit(ids.data(), 300, 0);
      index.clear();
      CHECK(fleet.bits() == 0 && index.blocks() == 0, "after clear");
      index.commit(ids.data(), 300, 0);
      checkIndexInvariants(index, "clear");
    }
    CHECK(fleet.bits() == 0, "fleet bits after the index was destroyed: " << fleet.bits());
  }
}

// Directed cases with ids that are not chained. Only consistency is asserted
// (block-index.h: "Ids that are not chained never corrupt the index"): each
// sequence is the smallest found by the garbage phases for its failure.
void nonChainedCases() {
  g.phase = "directed-non-chained";
  g.seed = 0;
  g.step = 0;
  g.trail.clear();
  auto run = [](BlockIndex& index, const std::vector<uint64_t>& ids) {
    ++g.step;
    const uint32_t n = static_cast<uint32_t>(ids.size());
    const uint32_t m = index.match(ids.data(), n);
    CHECK(m <= n, "match " << m << " > n " << n);
    note(describe("commit", 0, n, m), ids.data(), n);
    index.commit(ids.data(), n, m);
    checkIndexInvariants(index, "non-chained");
  };

  // A split where the block at the split depth (a plain run entry) has an id
  // that is indexed elsewhere: the new segment head cannot be indexed.
  {
    BlockIndex index(100);
    run(index, {100});     // X at depth 0, indexed
    run(index, {1, 100});  // X again at depth 1, inside a run
    run(index, {1, 2});    // split before depth 1
    const uint64_t a = 1;
    ++g.step;
    note("remove [0x1]");
    index.remove(&a, 1);
    checkIndexInvariants(index, "non-chained");
    const uint64_t x = 100;
    CHECK(index.match(&x, 1) == 1, "[X] at depth 0 is held but match() = " << index.match(&x, 1));
  }

  // The same id at strided depth 16 and at depth 17; a split before 17, the
  // tail evicted, then a split above depth 16 (which must re-point the
  // depth-16 entry).
  {
    BlockIndex index(100);
    std::vector<uint64_t> r1 = chain(1000, 16);
    std::vector<uint64_t> r2 = r1;
    r1.push_back(7);
    r1.push_back(7);
    r2.push_back(7);
    r2.push_back(99);
    run(index, r1);
    run(index, r2);
    ++g.step;
    note("setCapacity(18)");
    index.setCapacity(18);
    checkIndexInvariants(index, "non-chained");
    run(index, {1000, 1001, 1002, 1003, 1004, 55});
  }
}

}  // namespace core_test
