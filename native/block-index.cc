#include "block-index.h"

#include <algorithm>
#include <sstream>

namespace kvroute {

BlockIndex::BlockIndex(uint64_t capacityBlocks) : capacity_(capacityBlocks) {
  segs_.emplace_back();  // kRoot: the sentinel above every chain; never in the LRU list
}

uint32_t BlockIndex::match(const uint64_t* ids, uint32_t n) const {
  if (n == 0 || !holds(ids[0], 0)) return 0;
  // Invariant: ids[lo-1] is held and the answer lies in [lo, hi].
  uint32_t lo = 1;
  uint32_t hi = n;
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo + 1) / 2;
    if (holds(ids[mid - 1], mid - 1)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

uint32_t BlockIndex::allocSegment(uint32_t parent, uint32_t depthStart) {
  uint32_t s;
  if (!freeSegs_.empty()) {
    s = freeSegs_.back();
    freeSegs_.pop_back();
  } else {
    s = static_cast<uint32_t>(segs_.size());
    segs_.emplace_back();  // may reallocate: callers hold indices, never references
  }
  segs_[s].depthStart = depthStart;
  attachChild(parent, s);
  lruPushFront(s);
  return s;
}

void BlockIndex::freeSegment(uint32_t s) {
  lruUnlink(s);
  detachChild(s);
  std::vector<uint64_t>().swap(segs_[s].ids);
  segs_[s] = Segment();
  freeSegs_.push_back(s);
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

void BlockIndex::lruUnlink(uint32_t s) {
  Segment& x = segs_[s];
  if (x.lruPrev != kNone) {
    segs_[x.lruPrev].lruNext = x.lruNext;
  } else {
    lruHead_ = x.lruNext;
  }
  if (x.lruNext != kNone) {
    segs_[x.lruNext].lruPrev = x.lruPrev;
  } else {
    lruTail_ = x.lruPrev;
  }
  x.lruPrev = x.lruNext = kNone;
}

void BlockIndex::lruPushFront(uint32_t s) {
  Segment& x = segs_[s];
  x.lruPrev = kNone;
  x.lruNext = lruHead_;
  if (lruHead_ != kNone) segs_[lruHead_].lruPrev = s;
  lruHead_ = s;
  if (lruTail_ == kNone) lruTail_ = s;
}

void BlockIndex::lruInsertAfter(uint32_t anchor, uint32_t s) {
  Segment& x = segs_[s];
  Segment& a = segs_[anchor];
  x.lruPrev = anchor;
  x.lruNext = a.lruNext;
  if (a.lruNext != kNone) {
    segs_[a.lruNext].lruPrev = s;
  } else {
    lruTail_ = s;
  }
  a.lruNext = s;
}

uint32_t BlockIndex::splitBefore(uint32_t s, uint32_t depth) {
  uint32_t t;
  if (!freeSegs_.empty()) {
    t = freeSegs_.back();
    freeSegs_.pop_back();
  } else {
    t = static_cast<uint32_t>(segs_.size());
    segs_.emplace_back();
  }
  Segment& head = segs_[s];
  Segment& tail = segs_[t];
  const size_t keep = depth - head.depthStart;
  tail.depthStart = depth;
  tail.ids.assign(head.ids.begin() + static_cast<std::ptrdiff_t>(keep), head.ids.end());
  head.ids.resize(keep);
  for (uint64_t id : tail.ids) table_.find(id)->seg = t;
  // The tail takes over the head's children; the head's only child is the tail.
  tail.firstChild = head.firstChild;
  for (uint32_t c = tail.firstChild; c != kNone; c = segs_[c].nextSibling) segs_[c].parent = t;
  head.firstChild = kNone;
  attachChild(s, t);
  // Same last use as the head but deeper, so it is evicted just before it.
  lruInsertAfter(s, t);
  return t;
}

void BlockIndex::touchPath(uint32_t deepest) {
  // Deepest first, each ancestor pushed in front of it: the root-most segment
  // ends up most recent, which keeps every parent ahead of its children.
  for (uint32_t s = deepest; s != kRoot; s = segs_[s].parent) {
    if (lruHead_ == s) continue;
    lruUnlink(s);
    lruPushFront(s);
  }
}

uint64_t BlockIndex::commit(const uint64_t* ids, uint32_t n, uint32_t matched) {
  uint32_t deepest = kRoot;
  if (matched > 0) {
    // Callers pass match()'s result, so ids[matched-1] is held at depth
    // matched-1; anything else is recomputed rather than trusted.
    const IdSlot* last = table_.find(ids[matched - 1]);
    if (last == nullptr || last->depth != matched - 1) return commit(ids, n, match(ids, n));
    deepest = last->seg;
    if (matched < segs_[deepest].depthEnd()) splitBefore(deepest, matched);
  }
  uint32_t leaf = deepest;
  if (n > matched) {
    const bool extend = deepest != kRoot && segs_[deepest].firstChild == kNone;
    const uint32_t target = extend ? deepest : allocSegment(deepest, matched);
    uint32_t end = matched;
    while (end < n && table_.insert(ids[end], target, end)) ++end;
    if (end > matched) {
      std::vector<uint64_t>& run = segs_[target].ids;
      run.insert(run.end(), ids + matched, ids + end);
      count_ += end - matched;
      leaf = target;
    } else if (!extend) {
      freeSegment(target);  // the first new id was already held elsewhere: ids not chained
    }
  }
  if (leaf != kRoot) touchPath(leaf);
  return evictToCapacity();
}

uint64_t BlockIndex::evictToCapacity() {
  uint64_t evicted = 0;
  while (count_ > capacity_) {
    // Invariant: the least recently used segment is a leaf (see touchPath).
    const uint32_t victim = lruTail_;
    std::vector<uint64_t>& run = segs_[victim].ids;
    const uint64_t excess = count_ - capacity_;
    const size_t take = excess < run.size() ? static_cast<size_t>(excess) : run.size();
    for (size_t k = run.size() - take; k < run.size(); ++k) table_.erase(run[k]);
    run.resize(run.size() - take);
    count_ -= take;
    evicted += take;
    if (run.empty()) freeSegment(victim);
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
    for (uint64_t id : segs_[x].ids) table_.erase(id);
    removed += segs_[x].ids.size();
    lruUnlink(x);
    std::vector<uint64_t>().swap(segs_[x].ids);
    segs_[x] = Segment();
    freeSegs_.push_back(x);
  }
  std::vector<uint64_t>& run = segs_[s].ids;
  const size_t keep = depth - segs_[s].depthStart;
  for (size_t k = keep; k < run.size(); ++k) table_.erase(run[k]);
  removed += run.size() - keep;
  run.resize(keep);
  if (keep == 0) freeSegment(s);
  count_ -= removed;
  return removed;
}

uint64_t BlockIndex::remove(const uint64_t* ids, uint32_t n) {
  uint64_t removed = 0;
  for (uint32_t k = 0; k < n; ++k) {
    const IdSlot* slot = table_.find(ids[k]);
    if (slot != nullptr) removed += truncate(slot->seg, slot->depth);
  }
  return removed;
}

void BlockIndex::clear() {
  table_.clear();
  std::vector<Segment>().swap(segs_);
  std::vector<uint32_t>().swap(freeSegs_);
  segs_.emplace_back();
  lruHead_ = lruTail_ = kNone;
  count_ = 0;
}

uint64_t BlockIndex::setCapacity(uint64_t capacityBlocks) {
  capacity_ = capacityBlocks;
  return evictToCapacity();
}

size_t BlockIndex::bytes() const {
  size_t total = table_.bytes() + segs_.capacity() * sizeof(Segment) +
                 freeSegs_.capacity() * sizeof(uint32_t);
  for (const Segment& s : segs_) total += s.ids.capacity() * sizeof(uint64_t);
  return total;
}

std::string BlockIndex::checkInvariants() const {
  std::ostringstream err;
  uint64_t held = 0;
  size_t reachable = 0;
  std::vector<uint32_t> stack{kRoot};
  std::vector<uint8_t> seen(segs_.size(), 0);
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    if (seen[s]) return (err << "segment " << s << " reached twice", err.str());
    seen[s] = 1;
    const Segment& x = segs_[s];
    if (s != kRoot) {
      ++reachable;
      if (x.ids.empty()) return (err << "segment " << s << " is empty", err.str());
    }
    held += x.ids.size();
    for (size_t k = 0; k < x.ids.size(); ++k) {
      const IdSlot* slot = table_.find(x.ids[k]);
      if (slot == nullptr || slot->seg != s || slot->depth != x.depthStart + k) {
        return (err << "id " << x.ids[k] << " of segment " << s << " is mis-indexed", err.str());
      }
    }
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
  if (held != count_ || table_.size() != count_) {
    return (err << "count " << count_ << " but " << held << " in segments and " << table_.size()
                << " in the table",
            err.str());
  }
  if (reachable != segments()) return (err << "free list and tree disagree", err.str());
  // LRU order: every segment appears after (is older than) its parent.
  std::vector<uint8_t> listed(segs_.size(), 0);
  size_t listedCount = 0;
  uint32_t prev = kNone;
  for (uint32_t s = lruHead_; s != kNone; s = segs_[s].lruNext) {
    if (!seen[s] || s == kRoot || listed[s] || segs_[s].lruPrev != prev) {
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
  if (prev != lruTail_ || listedCount != reachable) return (err << "LRU list misses segments", err.str());
  return "";
}

void matchMany(const BlockIndex* const* indexes, size_t count, const uint64_t* ids, uint32_t n,
               int32_t* out) {
  if (n == 0) {
    std::fill(out, out + count, 0);
    return;
  }
  for (size_t k = 0; k < count; ++k) indexes[k]->prefetch(ids[0]);
  // Per active instance: lo/hi of its binary search (see BlockIndex::match).
  // `out` doubles as lo while a search runs; hi lives in a small local array.
  constexpr size_t kBatch = 64;
  uint32_t hi[kBatch];
  size_t active[kBatch];
  for (size_t base = 0; base < count; base += kBatch) {
    const size_t end = std::min(count, base + kBatch);
    size_t live = 0;
    for (size_t k = base; k < end; ++k) {
      out[k] = indexes[k]->holds(ids[0], 0) ? 1 : 0;
      if (out[k] == 1 && n > 1) {
        hi[live] = n;
        active[live++] = k;
      }
    }
    while (live > 0) {
      for (size_t a = 0; a < live; ++a) {
        const uint32_t lo = static_cast<uint32_t>(out[active[a]]);
        const uint32_t mid = lo + (hi[a] - lo + 1) / 2;
        indexes[active[a]]->prefetch(ids[mid - 1]);
      }
      size_t kept = 0;
      for (size_t a = 0; a < live; ++a) {
        const size_t k = active[a];
        uint32_t lo = static_cast<uint32_t>(out[k]);
        uint32_t h = hi[a];
        const uint32_t mid = lo + (h - lo + 1) / 2;
        if (indexes[k]->holds(ids[mid - 1], mid - 1)) {
          lo = mid;
        } else {
          h = mid - 1;
        }
        out[k] = static_cast<int32_t>(lo);
        if (lo < h) {
          hi[kept] = h;
          active[kept++] = k;
        }
      }
      live = kept;
    }
  }
}

}  // namespace kvroute
