// id-table — open-addressing hash map from a 64-bit block id to the place the
// block occupies in one instance's BlockIndex (segment number, depth).
//
// Why it exists: matching a request probes one id per binary-search step, so
// lookups must cost one or two cache lines. Slots are 16 bytes and stored
// inline; four share a cache line.
//
// Algorithm: linear probing over a power-of-two array; ids are scrambled with
// the SplitMix64 finalizer first because trace ids are often small dense
// integers. Deletion is backward-shift (no tombstones), so probe sequences
// never degrade under the insert/evict churn of an LRU cache.
//
// Tunables: kMaxLoad (0.7): the table doubles past it, so the load factor stays
// in [0.35, 0.7]. Complexity: O(1) expected per operation; doubling is O(n)
// amortised to O(1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvroute {

struct IdSlot {
  uint64_t id;
  uint32_t seg;    // IdTable::kEmptySeg marks a free slot
  uint32_t depth;  // position of the block in its chain (0 = first block)
};

class IdTable {
 public:
  static constexpr uint32_t kEmptySeg = 0xFFFFFFFFu;

  IdTable();

  // Returns the slot holding `id`, or nullptr.
  const IdSlot* find(uint64_t id) const {
    size_t i = bucketOf(id);
    for (;;) {
      const IdSlot& s = slots_[i];
      if (s.seg == kEmptySeg) return nullptr;
      if (s.id == id) return &s;
      i = (i + 1) & mask_;
    }
  }
  IdSlot* find(uint64_t id) { return const_cast<IdSlot*>(static_cast<const IdTable*>(this)->find(id)); }

  // Hints the CPU to load the home bucket of `id` (no effect on results).
  void prefetch(uint64_t id) const { __builtin_prefetch(&slots_[bucketOf(id)]); }

  // Inserts `id`; returns false, changing nothing, when it is already present.
  bool insert(uint64_t id, uint32_t seg, uint32_t depth);

  // Removes `id`; returns false when it was absent.
  bool erase(uint64_t id);

  void clear();
  size_t size() const { return size_; }
  size_t bytes() const { return slots_.capacity() * sizeof(IdSlot); }

 private:
  static constexpr size_t kInitialSlots = 64;
  static constexpr double kMaxLoad = 0.7;

  static uint64_t scramble(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
  }
  size_t bucketOf(uint64_t id) const { return static_cast<size_t>(scramble(id)) & mask_; }
  void resize(size_t slotCount);

  std::vector<IdSlot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  size_t growAt_ = 0;
};

}  // namespace kvroute
