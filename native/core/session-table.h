// session-table — bounded map from a session key to the instance it is pinned
// to, for the `sticky` policy and the sessions a router has placed under
// ringFirstTurn (one table, one key per (session, model group)).
//
// Why it exists: sessions end without telling the router, so pins must not
// grow without bound. The table keeps at most maxSessions pins and forgets the
// least recently used one when full; a forgotten session is placed afresh on
// its next turn, exactly like a new one.
//
// A pin records the instance slot and that slot's generation, so a pin to an
// instance that was removed (and whose slot was reused) is recognised as
// stale. Complexity: O(1) expected per operation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "util/index-list.h"

namespace kvroute {

struct SessionPin {
  uint32_t slot;
  uint32_t generation;
};

class SessionTable {
 public:
  explicit SessionTable(uint32_t maxSessions) : max_(maxSessions) {}

  // The pin for `key`, marking it most recently used; nullptr when absent.
  const SessionPin* lookup(uint64_t key);
  // The pin for `key` without touching recency (dry runs).
  const SessionPin* peek(uint64_t key) const;
  // Pins `key` (insert or overwrite), most recently used; may forget the LRU pin.
  void pin(uint64_t key, SessionPin where);
  void clear();
  void setMax(uint32_t maxSessions);
  size_t size() const { return index_.size(); }

 private:
  struct Node {
    uint64_t key;
    SessionPin pin;
    ListLinks lru;  // this pin's place in order_
  };
  auto links() {
    return [this](uint32_t n) -> ListLinks& { return nodes_[n].lru; };
  }
  void evictOverflow();

  uint32_t max_;
  std::unordered_map<uint64_t, uint32_t> index_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> free_;
  IndexList order_;  // most recently used first
};

}  // namespace kvroute
