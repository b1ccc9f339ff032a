#include "prompt-hash.h"

#include "xxhash64.h"

namespace kvroute {

size_t hashPromptBlocks(const uint8_t* bytes, size_t len, size_t chunkBytes, uint64_t* out) {
  size_t count = 0;
  uint64_t parent = 0;
  for (size_t start = 0; start < len; start += chunkBytes) {
    const size_t size = len - start < chunkBytes ? len - start : chunkBytes;
    parent = xxhash64(bytes + start, size, parent);
    out[count++] = parent;
  }
  return count;
}

}  // namespace kvroute
