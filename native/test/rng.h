// Deterministic randomness for core-test: a splitmix64 generator (no <random>
// distributions: they differ between standard libraries, and a seed must
// replay the same run everywhere) and the pickers of request lengths and
// capacities, which favour the edges of the BlockIndex stride.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/block-index.h"

namespace core_test {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  // Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1))); }
  bool percent(uint32_t p) { return below(100) < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  uint64_t state_;
};

constexpr uint32_t kStride = kvroute::BlockIndex::kStride;
constexpr uint32_t kMaxChain = 600;

// A length near a multiple of the stride (k*16 - 1, k*16, k*16 + 1), within [lo, hi].
inline uint32_t nearStride(Rng& rng, uint32_t lo, uint32_t hi) {
  const int64_t k = rng.range(0, hi / kStride + 1);
  const int64_t v = k * kStride + rng.range(-1, 1);
  return static_cast<uint32_t>(std::clamp<int64_t>(v, lo, hi));
}

inline uint32_t chainLength(Rng& rng) {
  switch (rng.below(4)) {
    case 0:
      return static_cast<uint32_t>(rng.range(1, 40));
    case 1:
      return nearStride(rng, 1, kMaxChain);
    case 2:
      return static_cast<uint32_t>(rng.range(1, kMaxChain));
    default:
      return static_cast<uint32_t>(rng.range(1, 200));
  }
}

inline uint32_t appendLength(Rng& rng) {
  static const std::vector<uint32_t> edges = {1, 2, 15, 16, 17, 31, 32, 33, 40};
  return rng.percent(50) ? static_cast<uint32_t>(rng.range(1, 40)) : rng.pick(edges);
}

// A cut point in [lo, size], often at a stride edge.
inline uint32_t cutPoint(Rng& rng, uint32_t lo, uint32_t size) {
  if (size <= lo) return size;
  return rng.percent(50) ? static_cast<uint32_t>(rng.range(lo, size)) : nearStride(rng, lo, size);
}

inline uint64_t pickCapacity(Rng& rng) {
  const uint64_t r = rng.below(100);
  if (r < 3) return rng.below(4);  // 0..3
  if (r < 18) {
    static const std::vector<uint64_t> edges = {15, 16, 17, 31, 32, 33, 47, 48, 49};
    return rng.pick(edges);
  }
  if (r < 58) return static_cast<uint64_t>(rng.range(20, 150));
  if (r < 93) return static_cast<uint64_t>(rng.range(150, 700));
  return static_cast<uint64_t>(rng.range(700, 2000));
}

}  // namespace core_test
