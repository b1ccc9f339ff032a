#include "trie/prefix-trie.h"

#include <sys/mman.h>

#include <chrono>
#include <new>
#include <random>
#include <utility>

namespace kvroute {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// SplitMix64's finalizer: a bijection on 64-bit values.
inline uint64_t mix(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace

// ---------------------------------------------------------------- HugeBuffer

// Anonymous mappings are zero-filled and page-aligned; buffers of 2 MiB or
// more are over-mapped and trimmed to a 2 MiB boundary so that huge pages can
// back them.
HugeBuffer::HugeBuffer(size_t bytes) : bytes_(bytes) {
  const size_t align = bytes >= kHugePage ? kHugePage : 0;
  // Whole huge pages, so that the trimmed ends are page-aligned whatever the page size.
  if (align != 0) bytes_ = bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  const size_t mapped = bytes + align;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<char*>(base);
  if (align != 0) {
    const auto address = reinterpret_cast<uintptr_t>(start);
    char* aligned = start + ((align - address % align) % align);
    if (aligned > start) munmap(start, static_cast<size_t>(aligned - start));
    char* end = start + mapped;
    if (end > aligned + bytes) munmap(aligned + bytes, static_cast<size_t>(end - (aligned + bytes)));
    start = aligned;
#ifdef MADV_HUGEPAGE
    madvise(start, bytes, MADV_HUGEPAGE);  // advice only: without huge pages it is a no-op
#endif
  }
  data_ = start;
}

HugeBuffer::HugeBuffer(HugeBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) munmap(data_, bytes_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

HugeBuffer::~HugeBuffer() {
  if (data_ != nullptr) munmap(data_, bytes_);
}

// ---------------------------------------------------------------- PrefixTrie

uint64_t PrefixTrie::randomSeed() {
  std::random_device device;
  return mix((static_cast<uint64_t>(device()) << 32) ^ device() ^
             static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
}

PrefixTrie::PrefixTrie(uint64_t seed) : seed_(seed) {
  chunks_.emplace_back(kChunkNodes * sizeof(Node));  // the root: all zero
  allocateTable(kInitialBits);
}

// The id is scrambled under the seed before the parent joins, so which pairs
// collide depends on the seed in a non-linear way.
uint64_t PrefixTrie::hash(uint32_t parent, uint64_t id) const { return mix(mix(id ^ seed_) + parent); }

void PrefixTrie::allocateTable(uint32_t bits) {
  const size_t slots = size_t{1} << bits;
  HugeBuffer old = std::exchange(table_, HugeBuffer(slots * sizeof(uint64_t)));
  bits_ = bits;
  mask_ = slots - 1;
  growAt_ = static_cast<uint64_t>(slots) * kMaxLoadNum / kMaxLoadDen;
  // Old slots in order: their homes in the new table ascend too, so the
  // writes stream (only a cluster that wrapped past the end comes first).
  const auto* from = static_cast<const uint64_t*>(old.data());
  const size_t oldSlots = old.bytes() / sizeof(uint64_t);
  uint64_t* to = table();
  for (size_t i = 0; i < oldSlots; ++i) {
    const uint64_t slot = from[i];
    if (static_cast<uint32_t>(slot) != 0) place(to, mask_, home(slot), slot);
  }
}

void PrefixTrie::place(uint64_t* table, size_t mask, size_t at, uint64_t slot) {
  while (static_cast<uint32_t>(table[at]) != 0) at = (at + 1) & mask;
  table[at] = slot;
}

uint32_t PrefixTrie::find(uint32_t parent, uint64_t id) const {
  const uint64_t h = hash(parent, id);
  const uint64_t tag = h >> 32;
  const uint64_t* slots = table();
  for (size_t at = home(h);; at = (at + 1) & mask_) {
    const uint64_t slot = slots[at];
    const auto node = static_cast<uint32_t>(slot);
    if (node == 0) return 0;
    if ((slot >> 32) == tag) {
      const Node& n = record(node);
      if (n.parent == parent && n.id == id) return node;
    }
  }
}

uint32_t PrefixTrie::walk(const uint64_t* ids, size_t n, uint32_t* path) {
  uint32_t node = 0;
  size_t depth = 0;
  for (; depth < n; ++depth) {
    const uint64_t id = ids[depth];
    const uint32_t link = record(node).link;
    // A first child's parent is `node` by construction: only its id to check.
    uint32_t child = link & ~kBranch;
    if (child == 0) break;
    if (record(child).id != id) {
      if ((link & kBranch) == 0) break;
      child = find(node, id);
      if (child == 0) break;
    }
    path[depth] = node = child;
  }
  const auto seen = static_cast<uint32_t>(depth);
  if (depth < n) insertRun(node, ids + depth, n - depth, path + depth);
  return seen;
}

void PrefixTrie::insertRun(uint32_t parent, const uint64_t* ids, size_t n, uint32_t* path) {
  const uint64_t last = nodes_ + n - 1;
  while (static_cast<uint64_t>(chunks_.size()) << kChunkBits <= last) chunks_.emplace_back(kChunkNodes * sizeof(Node));
  const auto first = static_cast<uint32_t>(nodes_);
  Node& top = record(parent);
  if (top.link == 0) {
    top.link = first;
  } else {
    if (entries_ + 1 > growAt_) allocateTable(bits_ + 1);
    top.link |= kBranch;
    const uint64_t h = hash(parent, ids[0]);
    place(table(), mask_, home(h), (h & 0xFFFFFFFF00000000ULL) | first);
    ++entries_;
  }
  for (size_t k = 0; k < n; ++k) {
    const uint32_t node = first + static_cast<uint32_t>(k);
    record(node) = Node{k == 0 ? parent : node - 1, k + 1 < n ? node + 1 : 0, ids[k]};
    path[k] = node;
  }
  nodes_ += n;
}

void PrefixTrie::markedDepths(const uint8_t* counts, size_t countLength, uint32_t minCount, uint32_t* depth) const {
  depth[0] = 0;
  for (uint32_t node = 1; node < nodes_; ++node) {
    const uint32_t count = node < countLength ? counts[node] : 0;
    depth[node] = depth[record(node).parent] + (count >= minCount ? 1 : 0);
  }
}

size_t PrefixTrie::bytes() const { return chunks_.size() * kChunkNodes * sizeof(Node) + table_.bytes(); }

}  // namespace kvroute
