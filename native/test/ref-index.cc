// The reference model of BlockIndex (ref-index.h): the operations that walk
// or change the held set.
#include "ref-index.h"

#include <unordered_set>
#include <utility>

#include "harness.h"
#include "rng.h"

namespace core_test {

uint64_t RefIndex::commit(const uint64_t* ids, uint32_t n, uint32_t matched) {
  // An id already held elsewhere means the ids are not chained: stop there.
  uint32_t end = matched;
  while (end < n && blocks_.count(ids[end]) == 0) ++end;
  for (int64_t depth = static_cast<int64_t>(end) - 1; depth >= 0; --depth) {
    const uint64_t id = ids[depth];
    auto it = blocks_.find(id);
    if (it == blocks_.end()) {
      Block b;
      b.depth = static_cast<uint32_t>(depth);
      b.hasParent = depth > 0;
      b.parent = depth > 0 ? ids[depth - 1] : 0;
      it = blocks_.emplace(id, b).first;
    } else {
      lru_.erase(it->second.tick);
    }
    it->second.tick = ++tick_;
    lru_.emplace(tick_, id);
  }
  return evictToCapacity();
}

uint64_t RefIndex::remove(const uint64_t* ids, uint32_t n) {
  uint64_t removed = 0;
  for (uint32_t k = 0; k < n; ++k) {
    if (blocks_.count(ids[k]) != 0) removed += removeSubtree(ids[k]);
  }
  return removed;
}

std::vector<uint64_t> RefIndex::heldIds() const {
  std::vector<uint64_t> out;
  out.reserve(lru_.size());
  for (const auto& [tick, id] : lru_) out.push_back(id);
  return out;
}

uint64_t RefIndex::stridedBlocks() const {
  uint64_t total = 0;
  for (const auto& [id, b] : blocks_) total += (b.depth % kStride == 0) ? 1 : 0;
  return total;
}

std::vector<std::vector<uint64_t>> RefIndex::leafPaths() const {
  std::unordered_set<uint64_t> parents;
  for (const auto& [id, b] : blocks_) {
    if (b.hasParent) parents.insert(b.parent);
  }
  std::vector<std::vector<uint64_t>> out;
  for (const auto& [id, b] : blocks_) {
    if (parents.count(id) != 0) continue;
    std::vector<uint64_t> path(b.depth + 1);
    uint64_t cur = id;
    for (int64_t d = b.depth; d >= 0; --d) {
      auto it = blocks_.find(cur);
      CHECK(it != blocks_.end() && it->second.depth == static_cast<uint32_t>(d),
            "reference model lost prefix closure at depth " << d << " of a leaf at depth " << b.depth);
      path[d] = cur;
      cur = it->second.parent;
    }
    out.push_back(std::move(path));
  }
  return out;
}

uint64_t RefIndex::evictToCapacity() {
  uint64_t evicted = 0;
  while (blocks_.size() > capacity_) {
    auto oldest = lru_.begin();
    blocks_.erase(oldest->second);
    lru_.erase(oldest);
    ++evicted;
  }
  return evicted;
}

uint64_t RefIndex::removeSubtree(uint64_t root) {
  std::unordered_set<uint64_t> doomed{root};
  // Parents are always more recent than their children, so walking from the
  // most recent end decides every parent before its children.
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
    const Block& b = blocks_.at(it->second);
    if (b.hasParent && doomed.count(b.parent) != 0) doomed.insert(it->second);
  }
  for (uint64_t id : doomed) {
    auto it = blocks_.find(id);
    lru_.erase(it->second.tick);
    blocks_.erase(it);
  }
  return doomed.size();
}

}  // namespace core_test
