// robin-hood-map — open-addressing hash map from a 64-bit id to a 56-bit
// value, the storage under every per-instance block index (id -> segment,
// depth) and the fleet index (id -> bitmask of instances).
//
// Why it exists: matching a request probes one id per search step and every
// dispatch inserts and evicts ids, so each operation must cost about one
// cache miss. Slots are 16 bytes, stored inline; four share a cache line.
//
// Algorithm: Robin Hood linear probing over a power-of-two array. Ids are
// xored with a per-map random seed and scrambled with the SplitMix64
// finalizer; both steps are bijections on 64-bit values, so a slot stores the
// scrambled key itself (equal keys mean equal ids) and its home bucket is read
// off the key. The seed keeps ids chosen to collide (hash flooding through
// client-supplied hash_ids) from being crafted offline. Each slot records its
// distance from home in the top 8 bits of its word (255 marks an empty slot);
// an insert displaces any resident nearer its home, a search stops at the
// first slot nearer its home than the searcher, and deletion shifts the
// following run back (no tombstones, so insert/evict churn never degrades
// the map).
//
// Tunables: kMaxLoad (0.7): the array doubles past it, so the load factor
// stays in [0.35, 0.7]. Complexity: O(1) expected per operation; doubling is
// O(n), amortised O(1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvroute {

class RobinHoodMap {
 public:
  static constexpr uint64_t kValueMask = (1ULL << 56) - 1;

  struct Slot {
    uint64_t key;   // scramble(id): ids are never stored, only their bijective image
    uint64_t word;  // value (low 56 bits) | distance from home (high 8 bits)
    uint64_t value() const { return word & kValueMask; }
    uint32_t dist() const { return static_cast<uint32_t>(word >> 56); }
    bool empty() const { return dist() == kEmptyDist; }
  };

  RobinHoodMap();

  // The slot holding `id`, or nullptr.
  const Slot* find(uint64_t id) const {
    const uint64_t key = scramble(id);
    size_t i = static_cast<size_t>(key) & mask_;
    for (uint32_t d = 0;; ++d) {
      const Slot& s = slots_[i];
      // An empty slot's distance (255) exceeds any searcher's: it stops too.
      if (s.dist() < d || s.empty()) return nullptr;
      if (s.key == key) return &s;
      i = (i + 1) & mask_;
    }
  }
  Slot* find(uint64_t id) { return const_cast<Slot*>(static_cast<const RobinHoodMap*>(this)->find(id)); }

  // Hints the CPU to load the home bucket of `id` (no effect on results).
  void prefetch(uint64_t id) const { __builtin_prefetch(&slots_[static_cast<size_t>(scramble(id)) & mask_]); }

  static void setValue(Slot* slot, uint64_t value) { slot->word = (slot->word & ~kValueMask) | value; }

  // Inserts id -> value (value <= kValueMask); returns false, changing
  // nothing, when `id` is already present.
  bool insert(uint64_t id, uint64_t value) { return insertOrFind(id, value) == nullptr; }

  // One probe for both: inserts id -> value and returns nullptr, or, when `id`
  // is already present, changes nothing and returns its slot.
  Slot* insertOrFind(uint64_t id, uint64_t value);

  // Removes `id`; returns false when it was absent.
  bool erase(uint64_t id) {
    Slot* slot = find(id);
    if (slot == nullptr) return false;
    eraseSlot(slot);
    return true;
  }

  // Removes the entry at `slot` (from find(), with no change since).
  void eraseSlot(Slot* slot);

  template <typename Visit>
  void forEach(Visit visit) const {
    for (const Slot& s : slots_) {
      if (!s.empty()) visit(s);
    }
  }

  void clear();
  size_t size() const { return size_; }
  size_t bytes() const { return slots_.capacity() * sizeof(Slot); }

 private:
  static constexpr uint32_t kEmptyDist = 0xFF;
  static constexpr uint32_t kMaxDist = 0xFE;
  static constexpr size_t kInitialSlots = 64;
  static constexpr double kMaxLoad = 0.7;

  uint64_t scramble(uint64_t x) const {
    x ^= seed_;
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }
  static uint64_t withDist(uint64_t word, uint32_t dist) { return (word & kValueMask) | (uint64_t{dist} << 56); }
  void resize(size_t slotCount);
  // Places a slot whose key is absent, starting at bucket `i`, `dist` steps
  // from its home. If a probe would pass kMaxDist it returns false with
  // `slot` set to whichever entry is then homeless (Robin Hood may have
  // displaced another), so the caller can grow and place it again: nothing is
  // ever dropped.
  bool place(Slot& slot, size_t i, uint32_t dist);

  uint64_t seed_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t growAt_ = 0;
};

}  // namespace kvroute
