// The reference model core-test checks BlockIndex against:
// src/core/reference/block-index.ts, block by block. One record per held
// block; `lru_` orders blocks from least to most recently used (the Map
// insertion order of the TypeScript twin). Slow and obviously right; exact
// only for chained ids (leafPaths() CHECKs its own prefix closure).
#pragma once

#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace core_test {

class RefIndex {
 public:
  explicit RefIndex(uint64_t capacity) : capacity_(capacity) {}

  uint64_t capacity() const { return capacity_; }
  uint64_t size() const { return blocks_.size(); }

  bool holds(uint64_t id, uint32_t depth) const {
    auto it = blocks_.find(id);
    return it != blocks_.end() && it->second.depth == depth;
  }

  uint32_t match(const uint64_t* ids, uint32_t n) const {
    uint32_t matched = 0;
    while (matched < n && holds(ids[matched], matched)) ++matched;
    return matched;
  }

  // Touches ids[0..matched), inserts the rest, evicts to capacity.
  uint64_t commit(const uint64_t* ids, uint32_t n, uint32_t matched);

  // Forgets each listed id that is held, with everything below it.
  uint64_t remove(const uint64_t* ids, uint32_t n);

  void clear() {
    blocks_.clear();
    lru_.clear();
  }

  uint64_t setCapacity(uint64_t capacity) {
    capacity_ = capacity;
    return evictToCapacity();
  }

  // Held ids from least to most recently used.
  std::vector<uint64_t> heldIds() const;

  uint64_t stridedBlocks() const;

  // The full path (ids[0..depth]) of every block that has no held child.
  // Chained ids only: checks the model's own prefix closure on the way.
  std::vector<std::vector<uint64_t>> leafPaths() const;

 private:
  struct Block {
    uint32_t depth = 0;
    bool hasParent = false;
    uint64_t parent = 0;  // the id in front of this one when it was inserted
    uint64_t tick = 0;    // last use; the key of this block in lru_
  };

  uint64_t evictToCapacity();
  uint64_t removeSubtree(uint64_t root);

  uint64_t capacity_;
  uint64_t tick_ = 0;
  std::unordered_map<uint64_t, Block> blocks_;
  std::map<uint64_t, uint64_t> lru_;  // tick -> id
};

}  // namespace core_test
