#include "core/match-many.h"

#include <algorithm>

namespace kvroute {
namespace {

constexpr uint32_t kStride = BlockIndex::kStride;

uint32_t midOf(uint32_t lo, uint32_t hi) { return lo + (hi - lo + 1) / 2; }

// Each search step reads one strided id (its own cache line) and then that
// id's bucket: two dependent misses when the request was not just hashed (a
// replayed trace). So each round also prefetches the ids of both possible next
// steps, leaving one miss per round.
void prefetchNextIds(const uint64_t* ids, uint32_t lo, uint32_t mid, uint32_t hi) {
  if (mid < hi) __builtin_prefetch(ids + midOf(mid, hi) * kStride);
  if (lo < mid - 1) __builtin_prefetch(ids + midOf(lo, mid - 1) * kStride);
}

// Every search starts on [0, last], so the first two levels of the search
// tree are shared: fetch their ids up front.
void prefetchFirstIds(const uint64_t* ids, uint32_t last) {
  if (last == 0) return;
  const uint32_t root = midOf(0, last);
  __builtin_prefetch(ids + root * kStride);
  prefetchNextIds(ids, 0, root, last);
}

}  // namespace

void matchMany(const BlockIndex* const* indexes, size_t count, const uint64_t* ids, uint32_t n, int32_t* out) {
  if (n == 0) {
    std::fill(out, out + count, 0);
    return;
  }
  const uint32_t last = (n - 1) / kStride;  // the last strided position
  // Fetch the index objects first: computing a bucket reads the table's seed,
  // mask and array, and those loads would otherwise miss one after another.
  for (size_t k = 0; k < count; ++k) __builtin_prefetch(indexes[k]);
  prefetchFirstIds(ids, last);
  for (size_t k = 0; k < count; ++k) indexes[k]->prefetch(ids[0]);
  // Per active instance, the state of its binary search over strided
  // positions (see BlockIndex::match): lo/hi and the slot of position lo.
  constexpr size_t kBatch = 64;
  struct Search {
    size_t index;
    uint32_t lo, hi;
    const BlockIndex::Slot* held;
  };
  Search active[kBatch];
  for (size_t base = 0; base < count; base += kBatch) {
    const size_t end = std::min(count, base + kBatch);
    size_t live = 0;
    for (size_t k = base; k < end; ++k) {
      out[k] = 0;
      if (const BlockIndex::Slot* s = indexes[k]->findAt(ids[0], 0)) active[live++] = Search{k, 0, last, s};
    }
    for (bool searching = true; searching;) {
      for (size_t a = 0; a < live; ++a) {
        const Search& x = active[a];
        if (x.lo >= x.hi) continue;
        const uint32_t mid = midOf(x.lo, x.hi);
        indexes[x.index]->prefetch(ids[mid * kStride]);
        prefetchNextIds(ids, x.lo, mid, x.hi);
      }
      searching = false;
      for (size_t a = 0; a < live; ++a) {
        Search& x = active[a];
        if (x.lo >= x.hi) continue;
        const uint32_t mid = midOf(x.lo, x.hi);
        if (const BlockIndex::Slot* s = indexes[x.index]->findAt(ids[mid * kStride], mid * kStride)) {
          x.lo = mid;
          x.held = s;
        } else {
          x.hi = mid - 1;
        }
        searching = searching || x.lo < x.hi;
      }
    }
    // The walks: fetch every segment record, then every run, then walk.
    for (size_t a = 0; a < live; ++a) indexes[active[a].index]->prefetchSegment(BlockIndex::segOf(active[a].held));
    for (size_t a = 0; a < live; ++a) {
      indexes[active[a].index]->prefetchRun(BlockIndex::segOf(active[a].held), active[a].lo * kStride);
    }
    for (size_t a = 0; a < live; ++a) {
      const Search& x = active[a];
      out[x.index] = static_cast<int32_t>(indexes[x.index]->extendFrom(ids, x.lo * kStride, BlockIndex::segOf(x.held),
                                                                       BlockIndex::walkLimit(x.lo, last, n)));
    }
  }
}

namespace {

// The positions a group [lo, hi] (lo held, lo < hi) probes in one round of
// matchFleet's search: up to three, strictly inside (lo, hi], splitting it in
// quarters, so a round cuts the range fourfold and the three probes overlap.
struct Probes {
  uint32_t at[3];
  uint32_t count;
};

Probes probesOf(uint32_t lo, uint32_t hi) {
  Probes p{};
  const uint32_t span = hi - lo;
  if (span <= 3) {
    for (uint32_t k = 1; k <= span; ++k) p.at[p.count++] = lo + k;
    return p;
  }
  for (uint32_t k = 1; k <= 3; ++k) p.at[p.count++] = lo + (k * span + 3) / 4;
  return p;
}

// The ranges a group splits into after its probes: [lo, at0-1], [at0, at1-1],
// ..., [atLast, hi]; calls visit(a, b) for each.
template <typename Visit>
void eachSubrange(uint32_t lo, uint32_t hi, const Probes& p, Visit visit) {
  uint32_t start = lo;
  for (uint32_t k = 0; k < p.count; ++k) {
    visit(start, p.at[k] - 1);
    start = p.at[k];
  }
  visit(start, hi);
}

void prefetchProbeIds(const uint64_t* ids, uint32_t lo, uint32_t hi) {
  if (lo >= hi) return;
  const Probes p = probesOf(lo, hi);
  for (uint32_t k = 0; k < p.count; ++k) __builtin_prefetch(ids + p.at[k] * kStride);
}

}  // namespace

void matchFleet(const FleetIndex& fleet, uint64_t tracked, const BlockIndex* const* bySlot, const uint64_t* ids,
                uint32_t n, int32_t* matched) {
  auto eachBit = [](uint64_t mask, auto visit) {
    for (; mask != 0; mask &= mask - 1) visit(static_cast<uint32_t>(__builtin_ctzll(mask)));
  };
  if (n == 0 || tracked == 0) {
    eachBit(tracked, [&](uint32_t bit) { matched[bit] = 0; });
    return;
  }
  const uint32_t last = (n - 1) / kStride;
  fleet.prefetch(ids[0]);
  prefetchProbeIds(ids, 0, last);
  eachBit(tracked, [&](uint32_t bit) { __builtin_prefetch(bySlot[bit]); });

  // Groups of instances that all hold position lo and whose last held
  // position lies in [lo, hi]. A round probes a group at up to three
  // positions and splits it by which of them each instance holds; groups
  // never share an instance, so there are at most kMaxInstances of them.
  // Each round also prefetches the ids the next round's probes will read.
  struct Group {
    uint32_t lo, hi;
    uint64_t mask;
  };
  constexpr size_t kMax = FleetIndex::kMaxInstances;
  Group groups[kMax];
  Group next[kMax];
  uint32_t loOf[kMax];
  size_t count = 0;
  const uint64_t holders = fleet.holders(ids[0]) & tracked;
  eachBit(tracked & ~holders, [&](uint32_t bit) { matched[bit] = 0; });
  if (holders != 0) groups[count++] = Group{0, last, holders};
  while (count > 0) {
    for (size_t g = 0; g < count; ++g) {
      const Group& x = groups[g];
      if (x.lo >= x.hi) continue;
      const Probes p = probesOf(x.lo, x.hi);
      for (uint32_t k = 0; k < p.count; ++k) fleet.prefetch(ids[p.at[k] * kStride]);
      eachSubrange(x.lo, x.hi, p, [&](uint32_t a, uint32_t b) { prefetchProbeIds(ids, a, b); });
    }
    size_t nextCount = 0;
    for (size_t g = 0; g < count; ++g) {
      const Group& x = groups[g];
      if (x.lo >= x.hi) {
        eachBit(x.mask, [&](uint32_t bit) { loOf[bit] = x.lo; });
        continue;
      }
      const Probes p = probesOf(x.lo, x.hi);
      // Holders only shrink along a request; intersecting keeps that true
      // even for ids that are not chained.
      uint64_t held = x.mask;
      uint32_t start = x.lo;
      for (uint32_t k = 0; k < p.count && held != 0; ++k) {
        const uint64_t stillHeld = fleet.holders(ids[p.at[k] * kStride]) & held;
        if ((held & ~stillHeld) != 0) next[nextCount++] = Group{start, p.at[k] - 1, held & ~stillHeld};
        held = stillHeld;
        start = p.at[k];
      }
      if (held != 0) next[nextCount++] = Group{start, x.hi, held};
    }
    std::copy(next, next + nextCount, groups);
    count = nextCount;
  }

  // Each holder walks its own runs from its last held strided block: fetch
  // every slot, then every segment record, then every run, then walk.
  const BlockIndex::Slot* slotOf[kMax];
  eachBit(holders, [&](uint32_t bit) { bySlot[bit]->prefetch(ids[loOf[bit] * kStride]); });
  eachBit(holders, [&](uint32_t bit) {
    slotOf[bit] = bySlot[bit]->findAt(ids[loOf[bit] * kStride], loOf[bit] * kStride);
    if (slotOf[bit] != nullptr) bySlot[bit]->prefetchSegment(BlockIndex::segOf(slotOf[bit]));
  });
  eachBit(holders, [&](uint32_t bit) {
    if (slotOf[bit] != nullptr) bySlot[bit]->prefetchRun(BlockIndex::segOf(slotOf[bit]), loOf[bit] * kStride);
  });
  eachBit(holders, [&](uint32_t bit) {
    const BlockIndex& index = *bySlot[bit];
    // A missing slot means the ids are not chained (the fleet saw the id at
    // another depth): answer by the instance's own search instead.
    matched[bit] = static_cast<int32_t>(slotOf[bit] == nullptr
                                            ? index.match(ids, n)
                                            : index.extendFrom(ids, loOf[bit] * kStride, BlockIndex::segOf(slotOf[bit]),
                                                               BlockIndex::walkLimit(loOf[bit], last, n)));
  });
}

}  // namespace kvroute
