// block-index — one engine instance's prefix cache, as the router models it.
//
// Why it exists: the router sends a request where its prompt prefix is already
// cached. This index answers "how many leading blocks of this request does the
// instance hold?" and records what the instance caches after a dispatch.
//
// Model (docs/block-index.md is the specification the TypeScript twin follows):
//   * Blocks are identified by chained 64-bit ids: ids[k] stands for the whole
//     prefix ids[0..k]. A request's blocks form a path from the root.
//   * match(ids) is the length of the longest held prefix.
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
// touching a path costs O(segments on the path), not O(blocks).
//
// Sparse id index: only blocks at depths divisible by kStride, plus the first
// block of every segment, are entered in the id map (id -> segment, depth);
// the strided ones are also reported to the router's FleetIndex.
// Because a held block's prefix is always held, "held" is monotone along a
// request, so match() binary-searches the strided depths (O(log(n/kStride))
// probes) and then walks at most kStride-1 blocks along the segment runs,
// stepping into a child segment through its indexed first block. Appending or
// evicting a run of b blocks therefore costs about b/kStride hash operations;
// the id runs themselves are plain arrays.
//
// Complexity per commit: O(path segments + (new + evicted blocks)/kStride +
// blocks moved by a split). A split moves the tail of a segment, which in
// multi-turn traffic is the one-block partial tail of the previous turn.
//
// Precondition: ids are chained (docs/hashing.md). Ids that are not chained never
// corrupt the index: an indexed id already held elsewhere ends the insertion,
// and match results stay within [0, n].
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/fleet-index.h"
#include "util/index-list.h"
#include "util/robin-hood-map.h"

namespace kvroute {

class BlockIndex {
 public:
  // Depths divisible by kStride are hashed (a power of two).
  static constexpr uint32_t kStride = 16;
  static bool isStrided(uint32_t depth) { return (depth & (kStride - 1)) == 0; }

  explicit BlockIndex(uint64_t capacityBlocks);
  ~BlockIndex();
  BlockIndex(const BlockIndex&) = delete;
  BlockIndex& operator=(const BlockIndex&) = delete;

  // Reports this index's strided blocks to `fleet` under `bit` from now on.
  // Only on an empty index.
  void attachFleet(FleetIndex* fleet, uint32_t bit) {
    fleet_ = fleet;
    fleetBit_ = bit;
  }

  using Slot = RobinHoodMap::Slot;
  static uint32_t segOf(const Slot* s) { return static_cast<uint32_t>(s->value()); }
  static uint32_t depthOf(const Slot* s) { return static_cast<uint32_t>(s->value() >> 32); }
  // Longest chain the id map can place (depth is 24 bits of a slot).
  static constexpr uint32_t kMaxDepth = 0xFFFFFF;

  // The id-map slot of `id` when the instance holds it as its block at
  // `depth` (answerable for strided depths and segment heads), else nullptr.
  const Slot* findAt(uint64_t id, uint32_t depth) const {
    const Slot* s = table_.find(id);
    return s != nullptr && depthOf(s) == depth ? s : nullptr;
  }
  bool holdsIndexed(uint64_t id, uint32_t depth) const { return findAt(id, depth) != nullptr; }
  void prefetch(uint64_t id) const { table_.prefetch(id); }
  // Prefetch the segment record, then the run around `depth`, ahead of extendFrom.
  void prefetchSegment(uint32_t seg) const { __builtin_prefetch(&segs_[seg]); }
  void prefetchRun(uint32_t seg, uint32_t depth) const {
    const Segment& s = segs_[seg];
    if (depth >= s.depthStart && depth < s.depthEnd()) __builtin_prefetch(s.ids.data() + (depth - s.depthStart));
  }

  // After a search over strided positions ends at position lo (of `last`):
  // the walk may stop at the next strided depth, which the search showed is
  // not held, or at the end of the request.
  static uint32_t walkLimit(uint32_t lo, uint32_t last, uint32_t n) { return lo == last ? n : (lo + 1) * kStride; }

  // Given that the block at strided depth q is held in segment `seg`, and that
  // nothing at depth >= limit can be held: the length of the held prefix,
  // found by walking the runs from q. limit <= n.
  uint32_t extendFrom(const uint64_t* ids, uint32_t q, uint32_t seg, uint32_t limit) const;

  // Length of the longest held prefix of ids[0..n).
  uint32_t match(const uint64_t* ids, uint32_t n) const;

  // Records a dispatch of ids[0..n) whose held prefix is `matched` blocks
  // (the value match() returned): touches the prefix, inserts the rest, then
  // evicts to capacity. Returns the number of blocks evicted.
  uint64_t commit(const uint64_t* ids, uint32_t n, uint32_t matched);

  // Forgets each listed id that is held, together with every block below it,
  // so no hole is left. Returns the number of blocks removed. Ids found in the
  // sparse index cost O(1) each; any other listed id costs one scan of this
  // instance's runs (shared by the whole call), so batch removals.
  uint64_t remove(const uint64_t* ids, uint32_t n);

  void clear();

  // Changes the capacity; shrinking evicts immediately. Returns blocks evicted.
  uint64_t setCapacity(uint64_t capacityBlocks);

  uint64_t capacity() const { return capacity_; }
  uint64_t blocks() const { return count_; }
  size_t segments() const { return segs_.size() - freeSegs_.size() - 1; }
  // Heap bytes owned by this index (hash table, segment records and id runs).
  size_t bytes() const;
  // Held blocks at strided depths: what this index reports to its fleet. O(segments).
  size_t stridedBlocks() const;

  // Verifies every structural invariant; returns "" or a description of the
  // first violation. O(blocks); for tests.
  std::string checkInvariants() const;

 private:
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  static constexpr uint32_t kRoot = 0;
  static constexpr size_t kKeptRunCapacity = 64;  // ids a freed segment keeps allocated

  struct Segment {
    std::vector<uint64_t> ids;  // blocks at depths [depthStart, depthStart + ids.size())
    uint32_t depthStart = 0;
    uint32_t parent = kNone;
    uint32_t firstChild = kNone;
    uint32_t nextSibling = kNone;
    uint32_t prevSibling = kNone;
    ListLinks lru;  // this segment's place in lru_
    uint32_t depthEnd() const { return depthStart + static_cast<uint32_t>(ids.size()); }
  };

  uint32_t newSegment();
  uint32_t allocSegment(uint32_t parent, uint32_t depthStart);
  void releaseSegment(uint32_t s);
  void freeSegment(uint32_t s);
  void attachChild(uint32_t parent, uint32_t child);
  void detachChild(uint32_t child);
  // The accessor IndexList needs for lru_.
  auto lruLinks() {
    return [this](uint32_t s) -> ListLinks& { return segs_[s].lru; };
  }
  // The child of `s` whose first block is `id` at `depth`, or kNone.
  uint32_t childStartingWith(uint32_t s, uint64_t id, uint32_t depth) const;
  // The segment holding ids[depth] on the path of ids (ids[0..depth] held).
  uint32_t segmentHolding(const uint64_t* ids, uint32_t depth) const;
  // Splits segment s so that it ends just before `depth`; the tail becomes its
  // only child and keeps s's children (or, for ids that are not chained, is
  // dropped: see the definition).
  void splitBefore(uint32_t s, uint32_t depth);
  void touchPath(uint32_t deepest);
  uint64_t evictToCapacity();
  // Pops the last `take` blocks of segment s (and its head entry if that
  // empties it), keeping the id table in step. Does not free the segment.
  void popBlocks(uint32_t s, size_t take);
  // Removes blocks at depth >= `depth` of segment s and every segment below s.
  uint64_t truncate(uint32_t s, uint32_t depth);
  // Withdraws this instance's bit from every strided block it holds.
  void withdrawFromFleet();
  // Enter / drop a block in the id map (and, when strided, the fleet).
  bool indexBlock(uint64_t id, uint32_t seg, uint32_t depth);
  void unindexBlock(uint64_t id, uint32_t seg, uint32_t depth);
  static uint64_t location(uint32_t seg, uint32_t depth) { return seg | (uint64_t{depth} << 32); }

  RobinHoodMap table_;
  FleetIndex* fleet_ = nullptr;
  uint32_t fleetBit_ = 0;
  std::vector<Segment> segs_;
  std::vector<uint32_t> freeSegs_;
  IndexList lru_;  // segments, most recently used first; back(): the next eviction victim
  uint64_t capacity_;
  uint64_t count_ = 0;
};

}  // namespace kvroute
