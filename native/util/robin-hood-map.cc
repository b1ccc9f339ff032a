#include "util/robin-hood-map.h"

#include <atomic>
#include <chrono>
#include <random>

namespace kvroute {
namespace {

// One random_device read per process, then a SplitMix64 sequence: maps are
// created per instance and per clear(), and random_device is slow to open.
uint64_t randomSeed() {
  static const uint64_t base = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device() ^
           static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  }();
  static std::atomic<uint64_t> counter{0};
  uint64_t z = base + 0x9E3779B97F4A7C15ULL * (counter.fetch_add(1, std::memory_order_relaxed) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

constexpr RobinHoodMap::Slot kEmptySlot{0, ~0ULL};

}  // namespace

RobinHoodMap::RobinHoodMap() : seed_(randomSeed()) { resize(kInitialSlots); }

void RobinHoodMap::resize(size_t slotCount) {
  for (;;) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(slotCount, kEmptySlot);
    slots_.shrink_to_fit();
    mask_ = slotCount - 1;
    growAt_ = static_cast<size_t>(static_cast<double>(slotCount) * kMaxLoad);
    bool placedAll = true;
    for (const Slot& s : old) {
      if (s.empty()) continue;
      Slot slot{s.key, withDist(s.word, 0)};
      if (!place(slot, static_cast<size_t>(slot.key) & mask_, 0)) {
        placedAll = false;
        break;
      }
    }
    if (placedAll) return;
    // A probe run passed kMaxDist (never seen with a keyed hash at this
    // load): retry twice as large. `old` still holds every slot.
    slots_.swap(old);
    slotCount *= 2;
  }
}

bool RobinHoodMap::place(Slot& slot, size_t i, uint32_t dist) {
  for (;;) {
    Slot& s = slots_[i];
    if (s.empty()) {
      s = Slot{slot.key, withDist(slot.word, dist)};
      return true;
    }
    if (s.dist() < dist) {
      // Robin Hood: take the slot of the resident nearer its home; carry it on.
      const Slot carried = s;
      s = Slot{slot.key, withDist(slot.word, dist)};
      slot = carried;
      dist = carried.dist();
    }
    i = (i + 1) & mask_;
    if (++dist > kMaxDist) {
      slot.word = withDist(slot.word, 0);  // homeless again: it restarts at its home
      return false;
    }
  }
}

RobinHoodMap::Slot* RobinHoodMap::insertOrFind(uint64_t id, uint64_t value) {
  if (size_ + 1 > growAt_) resize(slots_.size() * 2);
  Slot pending{scramble(id), withDist(value, 0)};
  // One pass: search for the key until Robin Hood says it cannot be further
  // on; that slot is exactly where the insertion begins.
  size_t i = static_cast<size_t>(pending.key) & mask_;
  uint32_t dist = 0;
  for (;;) {
    const Slot& s = slots_[i];
    if (s.empty() || s.dist() < dist) break;
    if (s.key == pending.key) return &slots_[i];
    i = (i + 1) & mask_;
    ++dist;
  }
  if (dist > kMaxDist || !place(pending, i, dist)) {
    do {
      resize(slots_.size() * 2);
    } while (!place(pending, static_cast<size_t>(pending.key) & mask_, 0));
  }
  ++size_;
  return nullptr;
}

void RobinHoodMap::eraseSlot(Slot* slot) {
  size_t i = static_cast<size_t>(slot - slots_.data());
  // Backward shift: pull the following displaced slots one step home.
  for (;;) {
    const size_t next = (i + 1) & mask_;
    const Slot& n = slots_[next];
    if (n.empty() || n.dist() == 0) break;
    slots_[i] = Slot{n.key, withDist(n.word, n.dist() - 1)};
    i = next;
  }
  slots_[i] = kEmptySlot;
  --size_;
}

void RobinHoodMap::clear() {
  std::vector<Slot>().swap(slots_);
  size_ = 0;
  resize(kInitialSlots);
}

}  // namespace kvroute
