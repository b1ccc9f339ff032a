// Randomized BlockIndex phases of core-test. block-index: several instances
// (four reporting to one FleetIndex, one not) driven by chained multi-session
// streams, every match(), matchMany() and matchFleet() and every return value
// compared with RefIndex. garbage-block-index: ids that are not chained, where
// only safety is asserted (no crash, sanitizers quiet, invariants hold,
// results within [0, n]), as exact results need chained ids.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/block-index.h"
#include "core/fleet-index.h"
#include "core/match-many.h"
#include "harness.h"
#include "index-checks.h"
#include "phases.h"
#include "ref-index.h"
#include "rng.h"
#include "workload.h"

namespace core_test {

using kvroute::BlockIndex;
using kvroute::FleetIndex;

// Phase: BlockIndex instances driven directly, chained ids.
void blockIndexPhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0x9E3779B97F4A7C15ULL + 11);
  Workload wl(rng, 0xB10C0000 + seed);
  FleetIndex fleet;  // before the indexes: they withdraw from it when destroyed
  struct Inst {
    std::unique_ptr<BlockIndex> index;
    std::unique_ptr<RefIndex> ref;
    int32_t bit;  // -1: not reporting to the fleet
  };
  std::vector<Inst> insts;
  const int32_t bits[] = {0, 1, 9, 55, -1};
  for (int32_t bit : bits) {
    const uint64_t capacity = pickCapacity(rng);
    Inst inst{std::make_unique<BlockIndex>(capacity), std::make_unique<RefIndex>(capacity), bit};
    if (bit >= 0) inst.index->attachFleet(&fleet, static_cast<uint32_t>(bit));
    insts.push_back(std::move(inst));
  }
  uint64_t tracked = 0;
  const BlockIndex* bySlot[FleetIndex::kMaxInstances] = {};
  std::vector<const BlockIndex*> all;
  for (const Inst& inst : insts) {
    all.push_back(inst.index.get());
    if (inst.bit >= 0) {
      tracked |= uint64_t{1} << inst.bit;
      bySlot[inst.bit] = inst.index.get();
    }
  }
  std::vector<int32_t> manyOut(insts.size());
  int32_t fleetOut[FleetIndex::kMaxInstances];

  auto fleetCheck = [&]() {
    size_t reported = 0;
    for (const Inst& inst : insts) {
      if (inst.bit >= 0) reported += inst.index->stridedBlocks();
    }
    CHECK(fleet.bits() == reported, "fleet holds " << fleet.bits() << " bits, instances report " << reported);
  };

  for (g.step = 1; g.step <= ops; ++g.step) {
    const uint64_t r = rng.below(100);
    const size_t who = rng.below(insts.size());
    Inst& inst = insts[who];
    if (r < 78) {
      const Request req = wl.next();
      const uint32_t n = static_cast<uint32_t>(req.ids.size());
      const uint64_t* ids = req.ids.data();
      // Mostly session-affine, so prompts find their prefixes.
      const size_t target = rng.percent(75) ? req.session % insts.size() : who;
      const bool inflate = n > 0 && rng.percent(3);
      note(describe(inflate ? "commit(inflated matched)" : "commit", target, n), ids, n);
      // Every instance's match, three ways.
      std::vector<uint32_t> expected(insts.size());
      for (size_t k = 0; k < insts.size(); ++k) {
        expected[k] = insts[k].ref->match(ids, n);
        const uint32_t got = insts[k].index->match(ids, n);
        CHECK(got == expected[k], "instance " << k << ": match() = " << got << ", model " << expected[k]);
      }
      kvroute::matchMany(all.data(), all.size(), ids, n, manyOut.data());
      for (size_t k = 0; k < insts.size(); ++k) {
        CHECK(manyOut[k] == static_cast<int32_t>(expected[k]),
              "instance " << k << ": matchMany = " << manyOut[k] << ", model " << expected[k]);
      }
      std::fill(fleetOut, fleetOut + FleetIndex::kMaxInstances, -7);
      kvroute::matchFleet(fleet, tracked, bySlot, ids, n, fleetOut);
      for (uint32_t b = 0; b < FleetIndex::kMaxInstances; ++b) {
        int32_t want = -7;
        for (size_t k = 0; k < insts.size(); ++k) {
          if (insts[k].bit == static_cast<int32_t>(b)) want = static_cast<int32_t>(expected[k]);
        }
        CHECK(fleetOut[b] == want, "bit " << b << ": matchFleet = " << fleetOut[b] << ", expected " << want);
      }
      // Commit on the target.
      Inst& t = insts[target];
      uint32_t passed = expected[target];
      if (inflate && passed < n) passed = static_cast<uint32_t>(rng.range(passed + 1, n));
      const uint64_t evicted = t.index->commit(ids, n, passed);
      const uint64_t wantEvicted = t.ref->commit(ids, n, expected[target]);
      CHECK(evicted == wantEvicted, "instance " << target << ": commit(matched=" << passed << ") evicted " << evicted
                                                << ", model " << wantEvicted);
      const uint32_t after = t.index->match(ids, n);
      CHECK(after == t.ref->match(ids, n),
            "instance " << target << ": match after commit " << after << ", model " << t.ref->match(ids, n));
      CHECK(after == std::min<uint64_t>(n, t.ref->capacity()),
            "instance " << target << ": after commit the request holds " << after << " of " << n << " (capacity "
                        << t.ref->capacity() << ")");
      ++totals.commits;
      totals.evicted += evicted;
      checkIndexInvariants(*t.index, "commit");
      CHECK(t.index->blocks() == t.ref->size() && t.index->blocks() <= t.index->capacity(),
            "instance " << target << ": blocks " << t.index->blocks() << ", model " << t.ref->size());
      totals.maxSegments = std::max<uint64_t>(totals.maxSegments, t.index->segments());
    } else if (r < 88) {
      // remove() of a mix of held and other ids.
      std::vector<uint64_t> list;
      const std::vector<uint64_t> held = inst.ref->heldIds();
      const uint32_t count = static_cast<uint32_t>(rng.range(0, 6));
      for (uint32_t k = 0; k < count; ++k) {
        const uint64_t kind = rng.below(10);
        if (kind < 5 && !held.empty()) {
          list.push_back(rng.pick(held));
        } else if (kind < 8) {
          list.push_back(wl.recentId());
        } else {
          list.push_back(wl.fresh());
        }
      }
      note(describe("remove", who, count), list.data(), count);
      const uint64_t removed = inst.index->remove(list.data(), count);
      const uint64_t want = inst.ref->remove(list.data(), count);
      CHECK(removed == want, "instance " << who << ": remove() = " << removed << ", model " << want);
      totals.removed += removed;
      checkIndexInvariants(*inst.index, "remove");
      checkSameBlocks(*inst.index, *inst.ref, "remove");
    } else if (r < 95) {
      const uint64_t capacity = rng.percent(50) ? pickCapacity(rng) : inst.ref->capacity() / 2 + rng.below(40);
      note(describe("setCapacity", who, 0, static_cast<int64_t>(capacity)));
      const uint64_t evicted = inst.index->setCapacity(capacity);
      const uint64_t want = inst.ref->setCapacity(capacity);
      CHECK(evicted == want, "instance " << who << ": setCapacity evicted " << evicted << ", model " << want);
      CHECK(inst.index->capacity() == capacity, "capacity()");
      checkIndexInvariants(*inst.index, "setCapacity");
      checkSameBlocks(*inst.index, *inst.ref, "setCapacity");
    } else if (r < 96) {
      note(describe("clear", who, 0));
      inst.index->clear();
      inst.ref->clear();
      checkIndexInvariants(*inst.index, "clear");
      CHECK(inst.index->blocks() == 0, "blocks after clear");
    } else {
      // A full comparison of one instance.
      note(describe("full check", who, 0));
      checkSameBlocks(*inst.index, *inst.ref, "full");
      ++totals.fullChecks;
    }
    if (g.step % 16 == 0) {
      fleetCheck();
      checkSameBlocks(*insts[g.step / 16 % insts.size()].index, *insts[g.step / 16 % insts.size()].ref, "periodic");
      ++totals.fullChecks;
    }
  }
  ++g.step;
  note("final check");
  for (const Inst& inst : insts) {
    checkIndexInvariants(*inst.index, "final");
    checkSameBlocks(*inst.index, *inst.ref, "final");
  }
  fleetCheck();
  totals.ops += ops;
}

// Phase: BlockIndex with ids that are not chained. Only safety is asserted.
void garbageIndexPhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0xA24BAED4963EE407ULL + 5);
  GarbageWorkload wl(rng, 0x6A000 + seed);
  FleetIndex fleet;
  std::vector<std::unique_ptr<BlockIndex>> indexes;
  const int32_t bits[] = {0, 2, 55, -1};
  uint64_t tracked = 0;
  const BlockIndex* bySlot[FleetIndex::kMaxInstances] = {};
  std::vector<const BlockIndex*> all;
  for (int32_t bit : bits) {
    indexes.push_back(std::make_unique<BlockIndex>(pickCapacity(rng)));
    if (bit >= 0) {
      indexes.back()->attachFleet(&fleet, static_cast<uint32_t>(bit));
      tracked |= uint64_t{1} << bit;
      bySlot[bit] = indexes.back().get();
    }
    all.push_back(indexes.back().get());
  }
  std::vector<int32_t> manyOut(indexes.size());
  int32_t fleetOut[FleetIndex::kMaxInstances];

  for (g.step = 1; g.step <= ops; ++g.step) {
    const uint64_t r = rng.below(100);
    const size_t who = rng.below(indexes.size());
    BlockIndex& index = *indexes[who];
    if (r < 80) {
      const Request req = wl.next();
      const uint32_t n = static_cast<uint32_t>(req.ids.size());
      const uint64_t* ids = req.ids.data();
      note(describe("commit", who, n), ids, n);
      kvroute::matchMany(all.data(), all.size(), ids, n, manyOut.data());
      std::fill(fleetOut, fleetOut + FleetIndex::kMaxInstances, -7);
      kvroute::matchFleet(fleet, tracked, bySlot, ids, n, fleetOut);
      for (size_t k = 0; k < indexes.size(); ++k) {
        const uint32_t m = indexes[k]->match(ids, n);
        CHECK(m <= n, "instance " << k << ": match " << m << " > n " << n);
        CHECK(manyOut[k] >= 0 && manyOut[k] <= static_cast<int32_t>(n),
              "instance " << k << ": matchMany " << manyOut[k]);
      }
      for (uint32_t b = 0; b < FleetIndex::kMaxInstances; ++b) {
        if (bySlot[b] == nullptr) {
          CHECK(fleetOut[b] == -7, "untracked bit " << b << " written: " << fleetOut[b]);
        } else {
          CHECK(fleetOut[b] >= 0 && fleetOut[b] <= static_cast<int32_t>(n),
                "bit " << b << ": matchFleet " << fleetOut[b]);
        }
      }
      index.commit(ids, n, index.match(ids, n));
      CHECK(index.blocks() <= index.capacity(), "blocks " << index.blocks() << " over capacity " << index.capacity());
      ++totals.commits;
    } else if (r < 90) {
      std::vector<uint64_t> list;
      const uint32_t count = static_cast<uint32_t>(rng.range(0, 6));
      for (uint32_t k = 0; k < count; ++k) list.push_back(wl.anyId());
      note(describe("remove", who, count), list.data(), count);
      totals.removed += index.remove(list.data(), count);
    } else if (r < 97) {
      const uint64_t capacity = pickCapacity(rng);
      note(describe("setCapacity", who, 0, static_cast<int64_t>(capacity)));
      index.setCapacity(capacity);
      CHECK(index.blocks() <= capacity, "blocks over capacity after setCapacity");
    } else {
      note(describe("clear", who, 0));
      index.clear();
    }
    checkIndexInvariants(index, "garbage");
    if (g.step % 8 == 0) {
      size_t reported = 0;
      for (size_t k = 0; k < indexes.size(); ++k) {
        if (bits[k] >= 0) reported += indexes[k]->stridedBlocks();
      }
      CHECK(fleet.bits() == reported, "fleet holds " << fleet.bits() << " bits, instances report " << reported);
    }
  }
  totals.ops += ops;
}

}  // namespace core_test
