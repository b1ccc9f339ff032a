#include "session-table.h"

namespace kvroute {

const SessionPin* SessionTable::lookup(uint64_t key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  if (head_ != it->second) {
    unlink(it->second);
    pushFront(it->second);
  }
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
    if (head_ != it->second) {
      unlink(it->second);
      pushFront(it->second);
    }
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
  nodes_[n] = Node{key, where, kNone, kNone};
  index_.emplace(key, n);
  pushFront(n);
  evictOverflow();
}

void SessionTable::evictOverflow() {
  while (index_.size() > max_) {
    const uint32_t victim = tail_;
    unlink(victim);
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
  head_ = tail_ = kNone;
}

void SessionTable::unlink(uint32_t n) {
  Node& x = nodes_[n];
  if (x.prev != kNone) {
    nodes_[x.prev].next = x.next;
  } else {
    head_ = x.next;
  }
  if (x.next != kNone) {
    nodes_[x.next].prev = x.prev;
  } else {
    tail_ = x.prev;
  }
  x.prev = x.next = kNone;
}

void SessionTable::pushFront(uint32_t n) {
  Node& x = nodes_[n];
  x.prev = kNone;
  x.next = head_;
  if (head_ != kNone) nodes_[head_].prev = n;
  head_ = n;
  if (tail_ == kNone) tail_ = n;
}

}  // namespace kvroute
