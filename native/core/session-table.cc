#include "core/session-table.h"

namespace kvroute {

const SessionPin* SessionTable::lookup(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  order_.moveToFront(it->second, links());
  return &nodes_[it->second].pin;
}

const SessionPin* SessionTable::peek(uint64_t key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &nodes_[it->second].pin;
}

void SessionTable::pin(uint64_t key, SessionPin where) {
  auto it = index_.find(key);
  if (it != index_.end()) {
    nodes_[it->second].pin = where;
    order_.moveToFront(it->second, links());
    return;
  }
  uint32_t n;
  if (!free_.empty()) {
    n = free_.back();
    free_.pop_back();
  } else {
    n = static_cast<uint32_t>(nodes_.size());
    nodes_.push_back(Node{});
  }
  nodes_[n] = Node{key, where, ListLinks{}};
  index_.emplace(key, n);
  order_.pushFront(n, links());
  evictOverflow();
}

void SessionTable::evictOverflow() {
  while (index_.size() > max_) {
    const uint32_t victim = order_.back();
    order_.unlink(victim, links());
    index_.erase(nodes_[victim].key);
    free_.push_back(victim);
  }
}

void SessionTable::setMax(uint32_t maxSessions) {
  max_ = maxSessions;
  evictOverflow();
}

void SessionTable::clear() {
  index_.clear();
  std::vector<Node>().swap(nodes_);
  std::vector<uint32_t>().swap(free_);
  order_.clear();
}

}  // namespace kvroute
