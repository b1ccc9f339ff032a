// hash-ring — consistent hashing of session keys onto instances, for the
// `session_hash` policy and ringFirstTurn's first turns. It depends only on the
// instance names and vnodes, so router replicas with the same fleet agree.
//
// Why it exists: plain `key mod N` moves almost every session when an instance
// joins or leaves; a ring moves only the sessions of the arcs that changed
// hands (about 1/N of them).
//
// Algorithm: each live instance contributes `vnodes` points,
// point(v) = XXH64(utf8(instance name), seed = v), sorted by (point, slot). A
// key goes to the first point >= key, wrapping around; drained instances keep
// their points (so draining moves nothing else) but are skipped clockwise.
//
// Tunable: vnodes (default 160). Complexity: rebuild O(N·vnodes·log), lookup
// O(log(N·vnodes)) plus the drained points skipped.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvroute {

class HashRing {
 public:
  // `names[slot]` for every live slot; empty names mark free slots.
  void rebuild(const std::vector<std::string>& names, const std::vector<bool>& live, uint32_t vnodes);
  // First routable slot clockwise from `key`, or -1 when none is routable.
  template <typename Routable>
  int32_t lookup(uint64_t key, Routable routable) const {
    if (points_.empty()) return -1;
    size_t i = lowerBound(key);
    for (size_t step = 0; step < points_.size(); ++step, ++i) {
      if (i == points_.size()) i = 0;
      if (routable(points_[i].second)) return static_cast<int32_t>(points_[i].second);
    }
    return -1;
  }

 private:
  size_t lowerBound(uint64_t key) const;
  std::vector<std::pair<uint64_t, uint32_t>> points_;
};

}  // namespace kvroute
