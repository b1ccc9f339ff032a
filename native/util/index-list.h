// index-list — a doubly linked list threaded through the elements of a vector
// by index: the LRU orders of BlockIndex (segments) and SessionTable (pins).
//
// Elements are addressed by index, never by pointer, because their vector may
// reallocate. Each element carries its own ListLinks; the list keeps only its
// two ends, and every operation takes `links(i)`, an accessor returning
// element i's ListLinks&. The front is the most recently used end. O(1) per
// operation.
#pragma once

#include <cstdint>

namespace kvroute {

struct ListLinks {
  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  uint32_t prev = kNone;  // towards the front
  uint32_t next = kNone;  // towards the back
};

class IndexList {
 public:
  static constexpr uint32_t kNone = ListLinks::kNone;

  uint32_t front() const { return front_; }
  uint32_t back() const { return back_; }
  void clear() { front_ = back_ = kNone; }

  template <typename Links>
  void unlink(uint32_t i, Links links) {
    ListLinks& x = links(i);
    if (x.prev != kNone) {
      links(x.prev).next = x.next;
    } else {
      front_ = x.next;
    }
    if (x.next != kNone) {
      links(x.next).prev = x.prev;
    } else {
      back_ = x.prev;
    }
    x.prev = x.next = kNone;
  }

  template <typename Links>
  void pushFront(uint32_t i, Links links) {
    ListLinks& x = links(i);
    x.prev = kNone;
    x.next = front_;
    if (front_ != kNone) links(front_).prev = i;
    front_ = i;
    if (back_ == kNone) back_ = i;
  }

  // Places i right behind `anchor` (towards the back).
  template <typename Links>
  void insertAfter(uint32_t anchor, uint32_t i, Links links) {
    ListLinks& x = links(i);
    ListLinks& a = links(anchor);
    x.prev = anchor;
    x.next = a.next;
    if (a.next != kNone) {
      links(a.next).prev = i;
    } else {
      back_ = i;
    }
    a.next = i;
  }

  template <typename Links>
  void moveToFront(uint32_t i, Links links) {
    if (front_ == i) return;
    unlink(i, links);
    pushFront(i, links);
  }

 private:
  uint32_t front_ = kNone;
  uint32_t back_ = kNone;
};

}  // namespace kvroute
