// block-index — one engine instance's prefix cache, as the router models it.
//
// Why it exists: the router sends a request where its prompt prefix is already
// cached. This index answers "how many leading blocks of this request does the
// instance hold?" and records what the instance caches after a dispatch.
//
// Model (docs/block-index.md is the specification the TypeScript twin follows):
//   * Blocks are identified by chained 64-bit ids: ids[k] stands for the whole
//     prefix ids[0..k]. A request's blocks form a path from the root.
//   * match(ids) is the length of the longest held prefix. Because a held
//     block's prefix is always held (below), "held" is monotone along a
//     request, and match is a binary search: O(log n) probes, not O(n).
//   * Every held block b has a last-use tick t(b): the dispatch that last had b
//     on its path. Eviction removes the block with the smallest t, and among
//     equal t (one path) the deepest. A parent's t is never smaller than its
//     child's, and on ties the child goes first, so eviction never leaves a
//     prefix hole.
//   * Capacity is in blocks. commit() inserts, then evicts down to capacity, so
//     a request longer than the capacity keeps its first `capacity` blocks.
//
// Representation: a radix tree of segments. A segment is a run of blocks with
// no branch inside it and one shared t; the segments form a tree under a
// sentinel root. An LRU list of segments orders them by (t, deeper first), so
// touching a path costs O(segments on the path), not O(blocks). An IdTable
// maps each held id to (segment, depth) for the binary search.
//
// Complexity per commit: O(path segments + new blocks + evicted blocks +
// blocks moved by a split). A split moves the tail of a segment, which in
// multi-turn traffic is the one-block partial tail of the previous turn.
//
// Precondition: ids are chained (DESIGN.md). Ids that are not chained never
// corrupt the index: an id already held elsewhere ends the insertion, and
// match results stay within [0, n].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "id-table.h"

namespace kvroute {

class BlockIndex {
 public:
  explicit BlockIndex(uint64_t capacityBlocks);

  // True when the instance holds ids[depth] as the depth-th block of a chain.
  bool holds(uint64_t id, uint32_t depth) const {
    const IdSlot* s = table_.find(id);
    return s != nullptr && s->depth == depth;
  }
  void prefetch(uint64_t id) const { table_.prefetch(id); }

  // Length of the longest held prefix of ids[0..n).
  uint32_t match(const uint64_t* ids, uint32_t n) const;

  // Records a dispatch of ids[0..n) whose held prefix is `matched` blocks
  // (the value match() returned): touches the prefix, inserts the rest, then
  // evicts to capacity. Returns the number of blocks evicted.
  uint64_t commit(const uint64_t* ids, uint32_t n, uint32_t matched);

  // Forgets each listed id that is held, together with every block below it,
  // so no hole is left. Returns the number of blocks removed.
  uint64_t remove(const uint64_t* ids, uint32_t n);

  void clear();

  // Changes the capacity; shrinking evicts immediately. Returns blocks evicted.
  uint64_t setCapacity(uint64_t capacityBlocks);

  uint64_t capacity() const { return capacity_; }
  uint64_t blocks() const { return count_; }
  size_t segments() const { return segs_.size() - freeSegs_.size() - 1; }
  // Heap bytes owned by this index (hash table, segment records and id runs).
  size_t bytes() const;

  // Verifies every structural invariant; returns "" or a description of the
  // first violation. O(blocks); for tests.
  std::string checkInvariants() const;

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  static constexpr uint32_t kRoot = 0;

  struct Segment {
    std::vector<uint64_t> ids;  // blocks at depths [depthStart, depthStart + ids.size())
    uint32_t depthStart = 0;
    uint32_t parent = kNone;
    uint32_t firstChild = kNone;
    uint32_t nextSibling = kNone;
    uint32_t prevSibling = kNone;
    uint32_t lruPrev = kNone;  // towards the most recently used end
    uint32_t lruNext = kNone;  // towards the least recently used end
    uint32_t depthEnd() const { return depthStart + static_cast<uint32_t>(ids.size()); }
  };

  uint32_t allocSegment(uint32_t parent, uint32_t depthStart);
  void freeSegment(uint32_t s);
  void attachChild(uint32_t parent, uint32_t child);
  void detachChild(uint32_t child);
  void lruUnlink(uint32_t s);
  void lruPushFront(uint32_t s);
  void lruInsertAfter(uint32_t anchor, uint32_t s);
  // Splits segment s so that it ends just before `depth`; the tail becomes its
  // only child and keeps s's children. Returns the tail's index.
  uint32_t splitBefore(uint32_t s, uint32_t depth);
  void touchPath(uint32_t deepest);
  uint64_t evictToCapacity();
  // Removes blocks at depth >= `depth` of segment s and every segment below s.
  uint64_t truncate(uint32_t s, uint32_t depth);

  IdTable table_;
  std::vector<Segment> segs_;
  std::vector<uint32_t> freeSegs_;
  uint32_t lruHead_ = kNone;  // most recently used
  uint32_t lruTail_ = kNone;  // least recently used: the next eviction victim
  uint64_t capacity_;
  uint64_t count_ = 0;
};

// Matches one request against many instances in lockstep, so the cache misses
// of their binary searches overlap: each round issues every active instance's
// probe as a prefetch before testing any of them. out[k] receives the match
// length for indexes[k]. Same results as calling match() on each.
void matchMany(const BlockIndex* const* indexes, size_t count, const uint64_t* ids, uint32_t n,
               int32_t* out);

}  // namespace kvroute
