#include "core/block-index.h"

#include <algorithm>
#include <sstream>
#include <tuple>
#include <unordered_set>

namespace kvroute {
namespace {

// The first strided depth >= d.
inline uint32_t strideAtOrAfter(uint32_t d) { return (d + BlockIndex::kStride - 1) & ~(BlockIndex::kStride - 1); }

}  // namespace

BlockIndex::BlockIndex(uint64_t capacityBlocks) : capacity_(capacityBlocks) {
  segs_.emplace_back();  // kRoot: the sentinel above every chain; never in the LRU list
}

BlockIndex::~BlockIndex() { withdrawFromFleet(); }

void BlockIndex::withdrawFromFleet() {
  if (fleet_ == nullptr) return;
  for (size_t s = 1; s < segs_.size(); ++s) {
    const Segment& x = segs_[s];
    for (uint32_t d = strideAtOrAfter(x.depthStart); d < x.depthEnd(); d += kStride) {
      fleet_->remove(x.ids[d - x.depthStart], fleetBit_);
    }
  }
}

size_t BlockIndex::stridedBlocks() const {
  // Multiples of kStride in [start, end) = ceil(end / kStride) - ceil(start / kStride).
  size_t total = 0;
  for (size_t s = 1; s < segs_.size(); ++s) {
    const Segment& x = segs_[s];
    total += (strideAtOrAfter(x.depthEnd()) - strideAtOrAfter(x.depthStart)) / kStride;
  }
  return total;
}

bool BlockIndex::indexBlock(uint64_t id, uint32_t seg, uint32_t depth) {
  if (!table_.insert(id, location(seg, depth))) return false;
  if (fleet_ != nullptr && isStrided(depth)) fleet_->add(id, fleetBit_);
  return true;
}

void BlockIndex::unindexBlock(uint64_t id, uint32_t seg, uint32_t depth) {
  // Only the block that owns the entry may drop it: with ids that are not
  // chained the same id can be held at another place whose entry this is.
  Slot* slot = table_.find(id);
  if (slot == nullptr || segOf(slot) != seg || depthOf(slot) != depth) return;
  table_.eraseSlot(slot);
  if (fleet_ != nullptr && isStrided(depth)) fleet_->remove(id, fleetBit_);
}

uint32_t BlockIndex::childStartingWith(uint32_t s, uint64_t id, uint32_t depth) const {
  const Slot* slot = findAt(id, depth);
  if (slot == nullptr) return kNone;
  const Segment& c = segs_[segOf(slot)];
  return c.depthStart == depth && c.parent == s ? segOf(slot) : kNone;
}

uint32_t BlockIndex::extendFrom(const uint64_t* ids, uint32_t q, uint32_t seg, uint32_t limit) const {
  uint32_t d = q + 1;
  for (;;) {
    const Segment& s = segs_[seg];
    const uint32_t end = std::min(limit, s.depthEnd());
    while (d < end && s.ids[d - s.depthStart] == ids[d]) ++d;
    if (d < end || d == limit) return d;
    // The run ended where the request goes on: continue in the child whose
    // first block is the request's next one, if the instance holds it.
    seg = childStartingWith(seg, ids[d], d);
    if (seg == kNone) return d;
  }
}

uint32_t BlockIndex::match(const uint64_t* ids, uint32_t n) const {
  if (n == 0) return 0;
  const Slot* held = findAt(ids[0], 0);
  if (held == nullptr) return 0;
  // Binary search over strided positions p (depth p * kStride). Invariant:
  // position lo is held (its slot in `held`) and the last held position lies
  // in [lo, hi].
  const uint32_t last = (n - 1) / kStride;
  uint32_t lo = 0;
  uint32_t hi = last;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    if (const Slot* s = findAt(ids[mid * kStride], mid * kStride)) {
      lo = mid;
      held = s;
    } else {
      hi = mid - 1;
    }
  }
  return extendFrom(ids, lo * kStride, segOf(held), walkLimit(lo, last, n));
}

uint32_t BlockIndex::segmentHolding(const uint64_t* ids, uint32_t depth) const {
  const Slot* slot = table_.find(ids[depth & ~(kStride - 1)]);
  if (slot == nullptr) return kNone;
  uint32_t seg = segOf(slot);
  while (seg != kNone && depth >= segs_[seg].depthEnd()) {
    const uint32_t d = segs_[seg].depthEnd();
    seg = childStartingWith(seg, ids[d], d);
  }
  return seg;
}

uint32_t BlockIndex::newSegment() {
  if (!freeSegs_.empty()) {
    const uint32_t s = freeSegs_.back();
    freeSegs_.pop_back();
    return s;
  }
  segs_.emplace_back();  // may reallocate: callers hold indices, never references
  return static_cast<uint32_t>(segs_.size() - 1);
}

uint32_t BlockIndex::allocSegment(uint32_t parent, uint32_t depthStart) {
  const uint32_t s = newSegment();
  segs_[s].depthStart = depthStart;
  attachChild(parent, s);
  lru_.pushFront(s, lruLinks());
  return s;
}

void BlockIndex::releaseSegment(uint32_t s) {
  // Small runs keep their buffer for the next segment (saves a malloc/free
  // pair per dispatch); large ones give their memory back.
  std::vector<uint64_t> ids;
  ids.swap(segs_[s].ids);
  if (ids.capacity() <= kKeptRunCapacity)
    ids.clear();
  else
    std::vector<uint64_t>().swap(ids);
  segs_[s] = Segment();
  segs_[s].ids.swap(ids);
  freeSegs_.push_back(s);
}

void BlockIndex::freeSegment(uint32_t s) {
  lru_.unlink(s, lruLinks());
  detachChild(s);
  releaseSegment(s);
}

void BlockIndex::attachChild(uint32_t parent, uint32_t child) {
  Segment& c = segs_[child];
  Segment& p = segs_[parent];
  c.parent = parent;
  c.prevSibling = kNone;
  c.nextSibling = p.firstChild;
  if (p.firstChild != kNone) segs_[p.firstChild].prevSibling = child;
  p.firstChild = child;
}

void BlockIndex::detachChild(uint32_t child) {
  Segment& c = segs_[child];
  if (c.prevSibling != kNone) {
    segs_[c.prevSibling].nextSibling = c.nextSibling;
  } else {
    segs_[c.parent].firstChild = c.nextSibling;
  }
  if (c.nextSibling != kNone) segs_[c.nextSibling].prevSibling = c.prevSibling;
  c.parent = c.prevSibling = c.nextSibling = kNone;
}

void BlockIndex::splitBefore(uint32_t s, uint32_t depth) {
  // The tail's first block becomes a segment head and must be indexed. If its
  // id is already indexed elsewhere (ids not chained), the tail could not be
  // reached, so it is dropped instead, with everything below it.
  if (!isStrided(depth) && table_.find(segs_[s].ids[depth - segs_[s].depthStart]) != nullptr) {
    truncate(s, depth);
    return;
  }
  const uint32_t t = newSegment();
  Segment& head = segs_[s];
  Segment& tail = segs_[t];
  const size_t keep = depth - head.depthStart;
  tail.depthStart = depth;
  tail.ids.assign(head.ids.begin() + static_cast<std::ptrdiff_t>(keep), head.ids.end());
  head.ids.resize(keep);
  // Entries of the moved blocks now name the tail; its first block becomes a
  // segment head and is indexed even when its depth is not strided.
  for (uint32_t d = strideAtOrAfter(depth); d < tail.depthEnd(); d += kStride) {
    RobinHoodMap::setValue(table_.find(tail.ids[d - depth]), location(t, d));
  }
  if (!isStrided(depth)) indexBlock(tail.ids[0], t, depth);  // cannot fail: checked above
  // The tail takes over the head's children; the head's only child is the tail.
  tail.firstChild = head.firstChild;
  for (uint32_t c = tail.firstChild; c != kNone; c = segs_[c].nextSibling) segs_[c].parent = t;
  head.firstChild = kNone;
  attachChild(s, t);
  // Same last use as the head but deeper, so it is evicted just before it.
  lru_.insertAfter(s, t, lruLinks());
}

void BlockIndex::touchPath(uint32_t deepest) {
  // Deepest first, each ancestor pushed in front of it: the root-most segment
  // ends up most recent, which keeps every parent ahead of its children.
  for (uint32_t s = deepest; s != kRoot; s = segs_[s].parent) lru_.moveToFront(s, lruLinks());
}

uint64_t BlockIndex::commit(const uint64_t* ids, uint32_t n, uint32_t matched) {
  // Callers pass match()'s result, so ids[0..matched) is a held path ending
  // in segment `deepest`. Anything else is recomputed once rather than
  // trusted, and if even that does not locate (ids not chained), the request
  // is treated as matching nothing.
  auto locate = [this, ids](uint32_t m) {
    const uint32_t s = segmentHolding(ids, m - 1);
    return s != kNone && segs_[s].ids[m - 1 - segs_[s].depthStart] == ids[m - 1] ? s : kNone;
  };
  uint32_t deepest = kRoot;
  if (matched > 0 && (deepest = locate(matched)) == kNone) {
    matched = match(ids, n);
    deepest = matched > 0 ? locate(matched) : kRoot;
    if (deepest == kNone) {
      matched = 0;
      deepest = kRoot;
    }
  }
  if (matched > 0 && matched < segs_[deepest].depthEnd()) splitBefore(deepest, matched);
  uint32_t leaf = deepest;
  if (n > matched) {
    const bool extend = deepest != kRoot && segs_[deepest].firstChild == kNone;
    uint32_t target = deepest;
    uint32_t from = matched;
    if (!extend) {
      target = allocSegment(deepest, matched);
      if (!indexBlock(ids[matched], target, matched)) {
        freeSegment(target);  // the first new id is held elsewhere: ids not chained
        target = kNone;
      }
      from = matched + 1;
    }
    if (target != kNone) {
      uint32_t end = n;
      for (uint32_t d = strideAtOrAfter(from); d < n; d += kStride) {
        if (d + 4 * kStride < n) table_.prefetch(ids[d + 4 * kStride]);
        if (!indexBlock(ids[d], target, d)) {
          end = d;  // held elsewhere: ids not chained; keep what precedes it
          break;
        }
      }
      std::vector<uint64_t>& run = segs_[target].ids;
      run.insert(run.end(), ids + matched, ids + end);
      count_ += end - matched;
      leaf = target;
    }
  }
  if (leaf != kRoot) touchPath(leaf);
  return evictToCapacity();
}

void BlockIndex::popBlocks(uint32_t s, size_t take) {
  Segment& x = segs_[s];
  const size_t size = x.ids.size();
  const uint32_t oldEnd = x.depthEnd();
  const uint32_t newEnd = oldEnd - static_cast<uint32_t>(take);
  for (uint32_t d = strideAtOrAfter(newEnd); d < oldEnd; d += kStride) unindexBlock(x.ids[d - x.depthStart], s, d);
  if (take == size && !isStrided(x.depthStart)) unindexBlock(x.ids[0], s, x.depthStart);  // the head entry
  x.ids.resize(size - take);
  count_ -= take;
}

uint64_t BlockIndex::evictToCapacity() {
  uint64_t evicted = 0;
  while (count_ > capacity_) {
    // Invariant: the least recently used segment is a leaf (see touchPath).
    const uint32_t victim = lru_.back();
    const uint64_t excess = count_ - capacity_;
    const size_t size = segs_[victim].ids.size();
    const size_t take = excess < size ? static_cast<size_t>(excess) : size;
    popBlocks(victim, take);
    evicted += take;
    if (take == size) freeSegment(victim);
  }
  return evicted;
}

uint64_t BlockIndex::truncate(uint32_t s, uint32_t depth) {
  uint64_t removed = 0;
  // Drop every segment below s. They vanish together, so their child links
  // need no per-segment repair; only LRU links and the id table do.
  std::vector<uint32_t> stack;
  for (uint32_t c = segs_[s].firstChild; c != kNone; c = segs_[c].nextSibling) stack.push_back(c);
  segs_[s].firstChild = kNone;
  while (!stack.empty()) {
    const uint32_t x = stack.back();
    stack.pop_back();
    for (uint32_t c = segs_[x].firstChild; c != kNone; c = segs_[c].nextSibling) stack.push_back(c);
    const size_t size = segs_[x].ids.size();
    popBlocks(x, size);
    removed += size;
    lru_.unlink(x, lruLinks());
    releaseSegment(x);
  }
  const size_t take = segs_[s].depthEnd() - depth;
  popBlocks(s, take);
  removed += take;
  if (segs_[s].ids.empty()) freeSegment(s);
  return removed;
}

uint64_t BlockIndex::remove(const uint64_t* ids, uint32_t n) {
  uint64_t removed = 0;
  std::unordered_set<uint64_t> unresolved;
  for (uint32_t k = 0; k < n; ++k) {
    const Slot* slot = table_.find(ids[k]);
    if (slot != nullptr) {
      removed += truncate(segOf(slot), depthOf(slot));
    } else {
      unresolved.insert(ids[k]);
    }
  }
  if (unresolved.empty() || count_ == 0) return removed;
  // Ids outside the sparse index: one scan of the runs finds them all.
  std::vector<std::tuple<uint32_t, uint32_t, uint64_t>> found;
  for (uint32_t s = 1; s < segs_.size(); ++s) {
    const Segment& x = segs_[s];
    for (size_t k = 0; k < x.ids.size(); ++k) {
      if (unresolved.count(x.ids[k]) != 0) found.emplace_back(s, x.depthStart + static_cast<uint32_t>(k), x.ids[k]);
    }
  }
  for (const auto& [s, depth, id] : found) {
    // An earlier truncation may already have taken this block.
    const Segment& x = segs_[s];
    if (depth >= x.depthStart && depth < x.depthEnd() && x.ids[depth - x.depthStart] == id) {
      removed += truncate(s, depth);
    }
  }
  return removed;
}

void BlockIndex::clear() {
  withdrawFromFleet();
  table_.clear();
  std::vector<Segment>().swap(segs_);
  std::vector<uint32_t>().swap(freeSegs_);
  segs_.emplace_back();
  lru_.clear();
  count_ = 0;
}

uint64_t BlockIndex::setCapacity(uint64_t capacityBlocks) {
  capacity_ = capacityBlocks;
  return evictToCapacity();
}

size_t BlockIndex::bytes() const {
  size_t total = table_.bytes() + segs_.capacity() * sizeof(Segment) + freeSegs_.capacity() * sizeof(uint32_t);
  for (const Segment& s : segs_) total += s.ids.capacity() * sizeof(uint64_t);
  return total;
}

std::string BlockIndex::checkInvariants() const {
  std::ostringstream err;
  uint64_t held = 0;
  size_t entries = 0;
  size_t reachable = 0;
  std::vector<uint32_t> stack{kRoot};
  std::vector<uint8_t> seen(segs_.size(), 0);
  auto indexedAt = [this](uint64_t id, uint32_t seg, uint32_t depth) {
    const Slot* slot = table_.find(id);
    const bool inFleet = fleet_ == nullptr || !isStrided(depth) || ((fleet_->holders(id) >> fleetBit_) & 1) != 0;
    return slot != nullptr && segOf(slot) == seg && depthOf(slot) == depth && inFleet;
  };
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    if (seen[s]) return (err << "segment " << s << " reached twice", err.str());
    seen[s] = 1;
    const Segment& x = segs_[s];
    if (s != kRoot) {
      ++reachable;
      if (x.ids.empty()) return (err << "segment " << s << " is empty", err.str());
      if (!indexedAt(x.ids[0], s, x.depthStart))
        return (err << "head of segment " << s << " is not indexed", err.str());
      if (!isStrided(x.depthStart)) ++entries;
      for (uint32_t d = strideAtOrAfter(x.depthStart); d < x.depthEnd(); d += kStride) {
        if (!indexedAt(x.ids[d - x.depthStart], s, d)) {
          return (err << "block at depth " << d << " of segment " << s << " is mis-indexed", err.str());
        }
        ++entries;
      }
    }
    held += x.ids.size();
    uint32_t prev = kNone;
    for (uint32_t c = x.firstChild; c != kNone; c = segs_[c].nextSibling) {
      const Segment& child = segs_[c];
      if (child.parent != s || child.prevSibling != prev || child.depthStart != x.depthEnd()) {
        return (err << "child " << c << " of segment " << s << " is mis-linked", err.str());
      }
      prev = c;
      stack.push_back(c);
    }
  }
  if (held != count_) return (err << "count " << count_ << " but " << held << " blocks in segments", err.str());
  if (entries != table_.size()) {
    return (err << "the id table has " << table_.size() << " entries, expected " << entries, err.str());
  }
  if (reachable != segments()) return (err << "free list and tree disagree", err.str());
  // LRU order: every segment appears after (is older than) its parent.
  std::vector<uint8_t> listed(segs_.size(), 0);
  size_t listedCount = 0;
  uint32_t prev = kNone;
  for (uint32_t s = lru_.front(); s != kNone; s = segs_[s].lru.next) {
    if (!seen[s] || s == kRoot || listed[s] || segs_[s].lru.prev != prev) {
      return (err << "LRU list is corrupt at segment " << s, err.str());
    }
    const uint32_t parent = segs_[s].parent;
    if (parent != kRoot && !listed[parent]) {
      return (err << "segment " << s << " is more recent than its parent " << parent, err.str());
    }
    listed[s] = 1;
    ++listedCount;
    prev = s;
  }
  if (prev != lru_.back() || listedCount != reachable) return (err << "LRU list misses segments", err.str());
  return "";
}

}  // namespace kvroute
