#include "hash/token-keys.h"

#include <vector>

#include "util/xxhash64.h"

namespace kvroute {

uint64_t tokenBlockKey(const uint32_t* tokens, uint32_t blockSize, uint64_t seed) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  // A u32 array already is its little-endian bytes.
  return xxhash64(reinterpret_cast<const uint8_t*>(tokens), static_cast<size_t>(blockSize) * 4, seed);
#else
  thread_local std::vector<uint8_t> bytes;
  bytes.resize(static_cast<size_t>(blockSize) * 4);
  for (uint32_t i = 0; i < blockSize; ++i) {
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<uint8_t>(tokens[i] >> (8 * b));
  }
  return xxhash64(bytes.data(), bytes.size(), seed);
#endif
}

size_t hashTokenBlocks(const uint32_t* tokens, size_t n, uint32_t blockSize, bool hasParent, uint64_t parentKey,
                       uint64_t* out) {
  const size_t count = n / blockSize;
  uint64_t seed = hasParent ? parentKey : blockSize;
  for (size_t k = 0; k < count; ++k) {
    seed = tokenBlockKey(tokens + k * blockSize, blockSize, seed);
    out[k] = seed;
  }
  return count;
}

}  // namespace kvroute
