// fleet-index — which instances hold each strided block, as one bitmask per
// block id, so one probe answers for the whole fleet.
//
// Why it exists: with a shared system prompt every instance holds the first
// blocks of almost every request, so per-instance binary searches would cost
// a probe per instance per step. Because "instance i holds the block at
// strided depth p" is monotone in p for every i, the set of holders only
// shrinks along a request: matchMany bisects groups of instances together,
// and the probes number about log(n / kStride) per distinct match length,
// however many instances share it.
//
// Each BlockIndex of a slot below kMaxInstances reports its strided entries
// here (bit = slot); instances in higher slots are searched one by one.
// Complexity: O(1) expected per update or lookup (a RobinHoodMap).
#pragma once

#include <cstdint>

#include "util/robin-hood-map.h"

namespace kvroute {

class FleetIndex {
 public:
  static constexpr uint32_t kMaxInstances = 56;  // bits of a RobinHoodMap value

  // Bitmask of the instances holding `id` (at a strided depth).
  uint64_t holders(uint64_t id) const {
    const RobinHoodMap::Slot* s = map_.find(id);
    return s == nullptr ? 0 : s->value();
  }
  void prefetch(uint64_t id) const { map_.prefetch(id); }

  void add(uint64_t id, uint32_t bit) {
    RobinHoodMap::Slot* s = map_.insertOrFind(id, uint64_t{1} << bit);
    if (s != nullptr) RobinHoodMap::setValue(s, s->value() | (uint64_t{1} << bit));
  }

  void remove(uint64_t id, uint32_t bit) {
    RobinHoodMap::Slot* s = map_.find(id);
    if (s == nullptr) return;
    const uint64_t rest = s->value() & ~(uint64_t{1} << bit);
    if (rest == 0) {
      map_.eraseSlot(s);
    } else {
      RobinHoodMap::setValue(s, rest);
    }
  }

  size_t size() const { return map_.size(); }
  // Total bits set: one per (instance, strided block held). O(size); for tests.
  size_t bits() const {
    size_t total = 0;
    map_.forEach([&](const RobinHoodMap::Slot& s) { total += static_cast<size_t>(__builtin_popcountll(s.value())); });
    return total;
  }
  size_t bytes() const { return map_.bytes(); }

 private:
  RobinHoodMap map_;
};

}  // namespace kvroute
