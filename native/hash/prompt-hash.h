// prompt-hash — chained block ids for prompt text.
//
// Why it exists: a live request that carries no `hash_ids` still needs block
// ids so the router can match it against what each engine has cached. The
// prompt's UTF-8 bytes are cut into fixed-size chunks and each chunk is hashed
// with its parent's id as the seed:
//
//   id[0] = XXH64(chunk[0], seed = 0)
//   id[k] = XXH64(chunk[k], seed = id[k-1])
//
// so an id stands for its whole prefix, exactly like vLLM's block hashes and
// a trace's `hash_ids`. The last, partial chunk gets an id too (Mooncake does
// the same), so a prompt of L bytes yields ceil(L / chunkBytes) ids.
//
// PromptHasher computes the same ids from text appended piece by piece, so a
// prompt assembled from a request body (request-scan.h) is hashed as it is
// written, never held whole.
//
// Tunable: chunkBytes (default 128). Complexity: O(L), no allocation
// (PromptHasher: one chunk of buffer, plus the ids it appends).
// docs/hashing.md is the specification the TypeScript twin follows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvroute {

constexpr uint32_t kDefaultChunkBytes = 128;

// Number of ids a prompt of `len` bytes yields.
inline size_t promptBlockCount(size_t len, size_t chunkBytes) { return (len + chunkBytes - 1) / chunkBytes; }

// Writes promptBlockCount(len, chunkBytes) ids to `out` and returns that count.
size_t hashPromptBlocks(const uint8_t* bytes, size_t len, size_t chunkBytes, uint64_t* out);

// hashPromptBlocks over the concatenation of every append(), appending the
// ids to `ids` as chunks complete; finish() hashes the last, partial chunk.
// Past `maxIds` ids it keeps counting bytes but stores no more (overflowed()).
class PromptHasher {
 public:
  PromptHasher(size_t chunkBytes, std::vector<uint64_t>& ids, size_t maxIds = SIZE_MAX);
  void append(const char* p, size_t n);
  void finish();
  // Bytes appended so far.
  uint64_t bytes() const { return total_; }
  bool overflowed() const { return overflowed_; }

 private:
  void emit(const char* p, size_t n);

  size_t chunkBytes_;
  std::vector<uint64_t>& ids_;
  size_t maxIds_;
  bool overflowed_ = false;
  std::vector<char> pending_;  // chunkBytes_ bytes, fill_ of them used
  size_t fill_ = 0;
  uint64_t parent_ = 0;
  uint64_t total_ = 0;
};

}  // namespace kvroute
