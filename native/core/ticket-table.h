// ticket-table — the router's record of each dispatched, unfinished request.
//
// Why it exists: first-token, completion and abort must undo exactly what the
// dispatch added to the shadow counters, even if the instance has since been
// drained or removed, and a ticket used twice must be refused, not applied
// twice. A ticket is a slab index plus a generation that changes every time
// the slot is freed: ticket = generation * 2^32 + index, an integer below
// 2^53 so it survives the trip through a JavaScript number.
//
// Complexity: O(1) per operation; the slab grows to the peak in-flight count.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace kvroute {

struct InFlight {
  uint32_t slot = 0;            // instance slot the request went to
  uint32_t slotGeneration = 0;  // that slot's generation at dispatch
  int64_t uncachedTokens = 0;   // added to the instance's prefill tokens
  int64_t blocks = 0;           // added to the instance's active blocks
  bool decoding = false;        // first token seen
};

class TicketTable {
 public:
  static constexpr uint32_t kGenerationLimit = 1u << 21;

  double open(const InFlight& request) {
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      index = static_cast<uint32_t>(entries_.size());
      entries_.push_back(Entry{});
    }
    Entry& e = entries_[index];
    e.inUse = true;
    e.request = request;
    ++open_;
    return static_cast<double>(e.generation) * 4294967296.0 + static_cast<double>(index);
  }

  // The open request behind `ticket`, or nullptr if the ticket is not open.
  InFlight* find(double ticket) {
    if (!(ticket >= 0) || ticket != std::floor(ticket) || ticket >= 9007199254740992.0) return nullptr;
    const uint64_t raw = static_cast<uint64_t>(ticket);
    const uint32_t index = static_cast<uint32_t>(raw & 0xFFFFFFFFu);
    const uint32_t generation = static_cast<uint32_t>(raw >> 32);
    if (index >= entries_.size()) return nullptr;
    Entry& e = entries_[index];
    if (!e.inUse || e.generation != generation) return nullptr;
    return &e.request;
  }

  void close(double ticket) {
    const uint32_t index = static_cast<uint32_t>(static_cast<uint64_t>(ticket) & 0xFFFFFFFFu);
    Entry& e = entries_[index];
    e.inUse = false;
    e.generation = (e.generation + 1) % kGenerationLimit;
    free_.push_back(index);
    --open_;
  }

  size_t openCount() const { return open_; }

  template <typename Visit>
  void forEachOpen(Visit visit) const {
    for (const Entry& e : entries_) {
      if (e.inUse) visit(e.request);
    }
  }

 private:
  struct Entry {
    InFlight request;
    uint32_t generation = 0;
    bool inUse = false;
  };
  std::vector<Entry> entries_;
  std::vector<uint32_t> free_;
  size_t open_ = 0;
};

}  // namespace kvroute
