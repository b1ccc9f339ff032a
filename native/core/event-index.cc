#include "core/event-index.h"

#include <algorithm>

#include "hash/token-keys.h"

namespace kvroute {
namespace {

std::string word(size_t i) { return "packed.ops[" + std::to_string(i) + "]"; }

}  // namespace

std::string EventIndex::validate(const PackedKvEvents& p) {
  if (p.opsLength % kOpWords != 0) {
    return "packed.opsLength must be a multiple of 4, got " + std::to_string(p.opsLength);
  }
  // 64-bit sums: count < 2^32 and blockSize <= 2^24 per record cannot overflow
  // before a sum passes the lengths, which are far below 2^64.
  uint64_t hashes = 0;
  uint64_t tokens = 0;
  for (size_t i = 0; i < p.opsLength; i += kOpWords) {
    const uint32_t op = p.ops[i];
    const uint32_t flags = p.ops[i + 1];
    const uint32_t count = p.ops[i + 2];
    const uint32_t blockSize = p.ops[i + 3];
    switch (op) {
      case kOpStored:
        if ((flags & ~(kFlagParent | kFlagOtherMedium | kFlagLora)) != 0) {
          return word(i + 1) + ": flags " + std::to_string(flags) + " are not valid for a BlockStored record";
        }
        if (blockSize < 1 || blockSize > kMaxBlockSize) {
          return word(i + 3) + ": block size must be in [1, 16777216], got " + std::to_string(blockSize);
        }
        hashes += ((flags & kFlagParent) != 0 ? 1 : 0) + uint64_t{count};
        tokens += uint64_t{count} * blockSize;
        break;
      case kOpRemoved:
        if ((flags & ~kFlagOtherMedium) != 0) {
          return word(i + 1) + ": flags " + std::to_string(flags) + " are not valid for a BlockRemoved record";
        }
        if (blockSize != 0) {
          return word(i + 3) + ": must be 0 in a BlockRemoved record, got " + std::to_string(blockSize);
        }
        hashes += count;
        break;
      case kOpCleared:
        for (size_t w = 1; w < kOpWords; ++w) {
          if (p.ops[i + w] != 0) {
            return word(i + w) + ": must be 0 in an AllBlocksCleared record, got " + std::to_string(p.ops[i + w]);
          }
        }
        break;
      default:
        return word(i) + ": unknown op " + std::to_string(op);
    }
    if (hashes > p.hashesLength) {
      return word(i + 2) + ": the records need " + std::to_string(hashes) + " hashes, hashesLength is " +
             std::to_string(p.hashesLength);
    }
    if (tokens > p.tokensLength) {
      return word(i + 2) + ": the records need " + std::to_string(tokens) + " tokens, tokensLength is " +
             std::to_string(p.tokensLength);
    }
  }
  if (hashes != p.hashesLength) {
    return "packed.hashesLength is " + std::to_string(p.hashesLength) + " but the records use " +
           std::to_string(hashes);
  }
  if (tokens != p.tokensLength) {
    return "packed.tokensLength is " + std::to_string(p.tokensLength) + " but the records use " +
           std::to_string(tokens);
  }
  return "";
}

void EventIndex::ensureSlots(size_t count) {
  if (slots_.size() < count) slots_.resize(count);
}

void EventIndex::reset(uint32_t slot) {
  ensureSlots(slot + 1);
  clear(slot);
  SlotEvents& s = slots_[slot];
  s.counters = EventCounters();
  // Give the emptied maps' memory back: a new instance starts small.
  s.engine = RobinHoodMap();
  s.keys = RobinHoodMap();
  std::vector<KeyRecord>().swap(s.records);
  std::vector<uint32_t>().swap(s.freeRecords);
  if (s.fed) setFed(slot, false);
}

void EventIndex::clear(uint32_t slot) {
  SlotEvents& s = slots_[slot];
  if (slot < kMaskSlots) {
    for (const KeyRecord& r : s.records) {
      if (r.refs != 0) fleet_.remove(r.key, slot);
    }
  }
  s.engine.clear();
  s.keys.clear();
  s.records.clear();
  s.freeRecords.clear();
  if (!s.inFlight.empty()) {
    for (const InFlightRequest& r : s.inFlight) inFlightSlot_.erase(r.ticket);
    s.inFlight.clear();
    inFlightSlots_.erase(std::find(inFlightSlots_.begin(), inFlightSlots_.end(), slot));
  }
}

void EventIndex::holdInFlight(uint32_t slot, double ticket, const uint64_t* ids, uint32_t n) {
  ensureSlots(slot + 1);
  const uint64_t key = static_cast<uint64_t>(ticket);
  if (n == 0 || !inFlightSlot_.emplace(key, slot).second) return;
  SlotEvents& s = slots_[slot];
  if (s.inFlight.empty()) {
    inFlightSlots_.insert(std::lower_bound(inFlightSlots_.begin(), inFlightSlots_.end(), slot), slot);
  }
  s.inFlight.push_back(InFlightRequest{key, std::vector<uint64_t>(ids, ids + n)});
}

void EventIndex::releaseInFlight(double ticket) {
  if (inFlightSlot_.empty()) return;
  const auto found = inFlightSlot_.find(static_cast<uint64_t>(ticket));
  if (found == inFlightSlot_.end()) return;
  const uint32_t slot = found->second;
  inFlightSlot_.erase(found);
  std::vector<InFlightRequest>& list = slots_[slot].inFlight;
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].ticket != static_cast<uint64_t>(ticket)) continue;
    list[i] = std::move(list.back());
    list.pop_back();
    break;
  }
  if (list.empty()) inFlightSlots_.erase(std::find(inFlightSlots_.begin(), inFlightSlots_.end(), slot));
}

uint32_t EventIndex::inFlightPrefix(uint32_t slot, const uint64_t* ids, uint32_t limit) const {
  uint32_t best = 0;
  for (const InFlightRequest& r : slots_[slot].inFlight) {
    // Chained keys: ids[k] == r.ids[k] exactly for k below the common prefix,
    // so the agreement is monotone and bisection finds its end.
    uint32_t lo = best;  // only a longer prefix matters
    uint32_t hi = std::min<uint32_t>(limit, static_cast<uint32_t>(r.ids.size()));
    if (hi <= lo || (lo > 0 && ids[lo - 1] != r.ids[lo - 1])) continue;
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      if (ids[mid - 1] == r.ids[mid - 1]) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    best = lo;
  }
  return best;
}

void EventIndex::setFed(uint32_t slot, bool on) {
  ensureSlots(slot + 1);
  slots_[slot].fed = on;
  refreshFed();
}

void EventIndex::refreshFed() {
  fedMask_ = 0;
  fedHigh_.clear();
  for (uint32_t s = 0; s < slots_.size(); ++s) {
    if (!slots_[s].fed) continue;
    if (s < kMaskSlots) {
      fedMask_ |= uint64_t{1} << s;
    } else {
      fedHigh_.push_back(s);
    }
  }
  alive_.resize(fedHigh_.size());
}

uint32_t EventIndex::hold(uint32_t slot, uint64_t key) {
  SlotEvents& s = slots_[slot];
  const uint32_t fresh = s.freeRecords.empty() ? static_cast<uint32_t>(s.records.size()) : s.freeRecords.back();
  RobinHoodMap::Slot* found = s.keys.insertOrFind(key, fresh);
  if (found != nullptr) {
    const uint32_t id = static_cast<uint32_t>(found->value());
    s.records[id].refs += 1;
    return id;
  }
  if (s.freeRecords.empty()) {
    s.records.emplace_back();
  } else {
    s.freeRecords.pop_back();
  }
  s.records[fresh] = KeyRecord{key, 1};
  if (slot < kMaskSlots) fleet_.add(key, slot);
  return fresh;
}

void EventIndex::release(uint32_t slot, uint32_t id) {
  SlotEvents& s = slots_[slot];
  KeyRecord& r = s.records[id];
  if (--r.refs != 0) return;
  s.keys.erase(r.key);
  if (slot < kMaskSlots) fleet_.remove(r.key, slot);
  s.freeRecords.push_back(id);
}

void EventIndex::stored(uint32_t slot, uint32_t flags, uint32_t count, uint32_t blockSize, const uint64_t* hashes,
                        const uint32_t* tokens) {
  SlotEvents& s = slots_[slot];
  // Offload tiers and adapters' blocks are not this engine's prefix cache for
  // the requests kvroute keys (docs/kv-events.md).
  if ((flags & (kFlagOtherMedium | kFlagLora)) != 0) {
    s.counters.ignored += count;
    return;
  }
  uint64_t seed = blockSize;
  if ((flags & kFlagParent) != 0) {
    const RobinHoodMap::Slot* parent = s.engine.find(hashes[0]);
    if (parent == nullptr) {
      s.counters.orphaned += count;
      return;
    }
    seed = s.records[parent->value()].key;
    hashes += 1;
  }
  // Two passes: the keys first (hashing is compute-bound), prefetching every
  // bucket the second pass will touch, so its cache misses overlap instead of
  // queueing one behind the other.
  keyScratch_.resize(count);
  for (uint32_t j = 0; j < count; ++j) {
    // The chain continues from this block's own key even when its engine hash
    // was already mapped: the key is what a request with these tokens hashes to.
    seed = tokenBlockKey(tokens + static_cast<size_t>(j) * blockSize, blockSize, seed);
    keyScratch_[j] = seed;
    s.engine.prefetch(hashes[j]);
    s.keys.prefetch(seed);
    if (slot < kMaskSlots) fleet_.prefetch(seed);
  }
  s.counters.stored += count;
  for (uint32_t j = 0; j < count; ++j) {
    if (s.engine.find(hashes[j]) != nullptr) continue;  // a re-store: idempotent
    const uint32_t id = hold(slot, keyScratch_[j]);
    s.engine.insert(hashes[j], id);
  }
}

void EventIndex::removed(uint32_t slot, uint32_t flags, uint32_t count, const uint64_t* hashes) {
  SlotEvents& s = slots_[slot];
  if ((flags & kFlagOtherMedium) != 0) {
    s.counters.ignored += count;
    return;
  }
  for (uint32_t j = 0; j < count; ++j) s.engine.prefetch(hashes[j]);
  for (uint32_t j = 0; j < count; ++j) {
    RobinHoodMap::Slot* mapped = s.engine.find(hashes[j]);
    if (mapped == nullptr) {
      s.counters.unknownRemoved += 1;
      continue;
    }
    const uint32_t id = static_cast<uint32_t>(mapped->value());
    s.engine.eraseSlot(mapped);
    release(slot, id);
    s.counters.removed += 1;
  }
}

void EventIndex::apply(uint32_t slot, const PackedKvEvents& p) {
  ensureSlots(slot + 1);
  size_t h = 0;
  size_t t = 0;
  for (size_t i = 0; i < p.opsLength; i += kOpWords) {
    const uint32_t op = p.ops[i];
    const uint32_t flags = p.ops[i + 1];
    const uint32_t count = p.ops[i + 2];
    const uint32_t blockSize = p.ops[i + 3];
    if (op == kOpStored) {
      stored(slot, flags, count, blockSize, p.hashes + h, p.tokens + t);
      h += ((flags & kFlagParent) != 0 ? 1 : 0) + static_cast<size_t>(count);
      t += static_cast<size_t>(count) * blockSize;
    } else if (op == kOpRemoved) {
      removed(slot, flags, count, p.hashes + h);
      h += count;
    } else {
      clear(slot);
      slots_[slot].counters.cleared += 1;
    }
  }
}

void EventIndex::match(const uint64_t* ids, uint32_t limit, int32_t* matched) const {
  uint64_t mask = fedMask_;
  size_t alive = fedHigh_.size();
  std::copy(fedHigh_.begin(), fedHigh_.end(), alive_.begin());
  uint32_t k = 0;
  for (; k < limit && (mask != 0 || alive != 0); ++k) {
    const uint64_t id = ids[k];
    if (mask != 0) {
      const uint64_t held = fleet_.holders(id);
      uint64_t lost = mask & ~held;
      mask &= held;
      while (lost != 0) {
        matched[__builtin_ctzll(lost)] = static_cast<int32_t>(k);
        lost &= lost - 1;
      }
    }
    for (size_t a = 0; a < alive;) {
      const uint32_t s = alive_[a];
      if (slots_[s].keys.find(id) != nullptr) {
        ++a;
      } else {
        matched[s] = static_cast<int32_t>(k);
        alive_[a] = alive_[--alive];  // order does not matter
      }
    }
  }
  while (mask != 0) {
    matched[__builtin_ctzll(mask)] = static_cast<int32_t>(k);
    mask &= mask - 1;
  }
  for (size_t a = 0; a < alive; ++a) matched[alive_[a]] = static_cast<int32_t>(k);
  // In-flight requests cover [0, L): past the event walk, the match resumes at L.
  for (uint32_t s : inFlightSlots_) {
    if (!slots_[s].fed) continue;
    uint32_t walk = inFlightPrefix(s, ids, limit);
    if (walk <= static_cast<uint32_t>(matched[s])) continue;
    while (walk < limit && slots_[s].keys.find(ids[walk]) != nullptr) ++walk;
    matched[s] = static_cast<int32_t>(walk);
  }
}

size_t EventIndex::bytes() const {
  size_t total = fleet_.bytes() + inFlightSlot_.size() * (sizeof(uint64_t) + sizeof(uint32_t) + 2 * sizeof(void*)) +
                 inFlightSlots_.capacity() * sizeof(uint32_t);
  for (const SlotEvents& s : slots_) {
    total += s.engine.bytes() + s.keys.bytes() + s.records.capacity() * sizeof(KeyRecord) +
             s.freeRecords.capacity() * sizeof(uint32_t) + s.inFlight.capacity() * sizeof(InFlightRequest);
    for (const InFlightRequest& r : s.inFlight) total += r.ids.capacity() * sizeof(uint64_t);
  }
  return total;
}

std::string EventIndex::checkInvariants() const {
  size_t maskBits = 0;
  for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
    const SlotEvents& s = slots_[slot];
    const std::string at = "event index slot " + std::to_string(slot) + ": ";
    // Each record's refs is the number of engine hashes naming it.
    std::vector<uint64_t> refs(s.records.size(), 0);
    bool badId = false;
    s.engine.forEach([&](const RobinHoodMap::Slot& e) {
      if (e.value() >= refs.size()) {
        badId = true;
      } else {
        refs[e.value()] += 1;
      }
    });
    if (badId) return at + "an engine hash names no record";
    size_t live = 0;
    for (uint32_t id = 0; id < s.records.size(); ++id) {
      const KeyRecord& r = s.records[id];
      if (r.refs != refs[id]) return at + "record " + std::to_string(id) + " counts the wrong number of hashes";
      if (r.refs == 0) continue;
      live += 1;
      const RobinHoodMap::Slot* k = s.keys.find(r.key);
      if (k == nullptr || k->value() != id) return at + "a held key is not in the key map";
      if (slot < kMaskSlots && (fleet_.holders(r.key) & (uint64_t{1} << slot)) == 0) {
        return at + "a held key is missing from the fleet mask";
      }
    }
    if (live != s.keys.size()) return at + "the key map holds keys no hash maps to";
    if (live + s.freeRecords.size() != s.records.size()) return at + "free records are miscounted";
    if (slot < kMaskSlots) maskBits += live;
    if (s.fed != (slot < kMaskSlots ? (fedMask_ >> slot & 1) != 0
                                    : std::binary_search(fedHigh_.begin(), fedHigh_.end(), slot))) {
      return at + "the fed flag and the fed lists disagree";
    }
  }
  if (fleet_.bits() != maskBits) return "event index: the fleet mask holds bits no slot holds";
  size_t remembered = 0;
  for (uint32_t slot = 0; slot < slots_.size(); ++slot) {
    const auto& list = slots_[slot].inFlight;
    remembered += list.size();
    if (list.empty() != !std::binary_search(inFlightSlots_.begin(), inFlightSlots_.end(), slot)) {
      return "event index slot " + std::to_string(slot) + ": the in-flight slot list disagrees";
    }
    for (const InFlightRequest& r : list) {
      const auto at = inFlightSlot_.find(r.ticket);
      if (at == inFlightSlot_.end() || at->second != slot) {
        return "event index slot " + std::to_string(slot) + ": an in-flight request is not in the ticket map";
      }
    }
  }
  if (remembered != inFlightSlot_.size()) return "event index: the ticket map names requests no slot remembers";
  return "";
}

}  // namespace kvroute
