#include "hash/prompt-hash.h"

#include <cstring>

#include "util/xxhash64.h"

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

PromptHasher::PromptHasher(size_t chunkBytes, std::vector<uint64_t>& ids, size_t maxIds)
    : chunkBytes_(chunkBytes), ids_(ids), maxIds_(maxIds), pending_(chunkBytes) {}

void PromptHasher::emit(const char* p, size_t n) {
  if (ids_.size() >= maxIds_) {
    overflowed_ = true;  // the ids past the cap are not needed: the caller refuses the prompt
    return;
  }
  parent_ = xxhash64(reinterpret_cast<const uint8_t*>(p), n, parent_);
  ids_.push_back(parent_);
}

void PromptHasher::append(const char* p, size_t n) {
  total_ += n;
  if (fill_ > 0) {
    const size_t take = n < chunkBytes_ - fill_ ? n : chunkBytes_ - fill_;
    std::memcpy(pending_.data() + fill_, p, take);
    fill_ += take;
    p += take;
    n -= take;
    if (fill_ < chunkBytes_) return;
    emit(pending_.data(), chunkBytes_);
    fill_ = 0;
  }
  // Whole chunks straight from the source, the rest kept for later.
  for (; n >= chunkBytes_; p += chunkBytes_, n -= chunkBytes_) emit(p, chunkBytes_);
  if (n > 0) std::memcpy(pending_.data(), p, n);
  fill_ = n;
}

void PromptHasher::finish() {
  if (fill_ > 0) emit(pending_.data(), fill_);
  fill_ = 0;
}

}  // namespace kvroute
