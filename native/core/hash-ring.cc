#include "core/hash-ring.h"

#include <algorithm>

#include "util/xxhash64.h"

namespace kvroute {

void HashRing::rebuild(const std::vector<std::string>& names, const std::vector<bool>& live, uint32_t vnodes) {
  points_.clear();
  for (size_t slot = 0; slot < names.size(); ++slot) {
    if (!live[slot]) continue;
    const auto* bytes = reinterpret_cast<const uint8_t*>(names[slot].data());
    for (uint32_t v = 0; v < vnodes; ++v) {
      points_.emplace_back(xxhash64(bytes, names[slot].size(), v), static_cast<uint32_t>(slot));
    }
  }
  std::sort(points_.begin(), points_.end());
}

size_t HashRing::lowerBound(uint64_t key) const {
  auto it = std::lower_bound(points_.begin(), points_.end(), std::make_pair(key, uint32_t{0}));
  return static_cast<size_t>(it - points_.begin());
}

}  // namespace kvroute
