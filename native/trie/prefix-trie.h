// prefix-trie — the trie of block-id sequences that trace analysis walks
// (`kvroute analyze trace`, and `analyze run`'s reuse split): every request of
// a trace, in arrival order, walks it from the root, inserting what is
// missing. The native twin of src/trace/prefix-trie.ts, with exactly its
// results: node 0 is the root, nodes are numbered in insertion order,
// walk() writes each block's node and returns how many leading blocks were
// already present. Only the layout differs.
//
// Why it exists: a 1M-request trace is ~84M blocks and ~18M nodes; the
// TypeScript trie spends most of its time on cache misses and on doubling
// its arrays, in the thread that also feeds the session shards.
//
// Layout:
//   * Nodes: 16-byte records {parent, first child, id} in chunks of 2 MiB
//     (2^kChunkBits records), so growing never copies and never holds two
//     copies, and at most one chunk is unused. A request inserts its new
//     blocks as a run of consecutive numbers, each the first child of the one
//     before, so a walk mostly goes from a record to the next one.
//   * The walk tries a node's first child before anything else; a flag in the
//     link says whether the node has other children. With no children, or a
//     first child of another id and no others, the block is absent without a
//     lookup. Where a later turn of a session continues past an earlier
//     turn's end, the continuation is that end's first child.
//   * Table: the other children only (a node that is not its parent's first
//     child: one per branching request at most, ~5% of the nodes of an
//     agentic trace). Open addressing, linear probing, 8-byte slots
//     (hash's top 32 bits << 32 | node; node 0 marks an empty slot). The hash
//     is a seeded 64-bit mix of (parent, id); a slot's home is the top
//     log2(slots) bits, so the stored 32 bits both filter probes (a match is
//     confirmed through the node record: a collision costs a probe, never a
//     wrong answer) and give the slot's home in a table twice as large, so
//     growing needs no node records.
//   * Chunks and tables of 2 MiB or more are 2 MiB-aligned and, on Linux,
//     advised onto transparent huge pages: a jump to a distant record then
//     rarely misses the TLB too.
//
// Tunables: kChunkBits (17: 2 MiB chunks), kMaxLoadNum/kMaxLoadDen (1/2: the
// table doubles past it, so its load stays in [1/4, 1/2]; the table is small,
// and each probe past the first is a compare on a hot path). Memory: 16 B per
// node, plus 16–32 B per table entry: ~18 B per node on the bench's agentic
// trace (the TypeScript trie: 28–56 B per node, with old and new arrays both
// alive while doubling).
// Complexity: O(1) expected per block; growing is O(slots), amortised O(1).
// Seeded per trie, so a crafted trace cannot make every (parent, id) collide.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvroute {

// A zeroed, 2 MiB-aligned block of memory, advised onto huge pages where the
// system has them; freed with its owner. Move-only.
class HugeBuffer {
 public:
  HugeBuffer() = default;
  explicit HugeBuffer(size_t bytes);
  HugeBuffer(HugeBuffer&& other) noexcept;
  HugeBuffer& operator=(HugeBuffer&& other) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;
  ~HugeBuffer();

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

class PrefixTrie {
 public:
  // Node numbers are 31-bit (a link's top bit is kBranch): 2^31 nodes (32
  // GiB) is far beyond any trace this analyses.
  static constexpr uint64_t kMaxNodes = uint64_t{1} << 31;

  // A trie holding only the root; `seed` keys the hash (randomSeed() for a fresh one).
  explicit PrefixTrie(uint64_t seed);
  static uint64_t randomSeed();

  // Nodes, the root included.
  uint64_t size() const { return nodes_; }
  // The parent of `node` (< size()); the root's is 0.
  uint32_t parentOf(uint32_t node) const { return record(node).parent; }

  // Walks `ids` (n of them) from the root, inserting what is missing, and
  // writes the node of every block into path[0..n). Returns how many leading
  // blocks were already present. Precondition: size() + n <= kMaxNodes.
  uint32_t walk(const uint64_t* ids, size_t n, uint32_t* path);

  // depth[v] for every node v: the nodes u on v's path (v included, the root
  // not) whose counts[u] >= minCount; counts past `countLength` are 0.
  // `depth` holds size() entries.
  void markedDepths(const uint8_t* counts, size_t countLength, uint32_t minCount, uint32_t* depth) const;

  // Bytes held: node chunks and table.
  size_t bytes() const;

 private:
  static constexpr uint32_t kChunkBits = 17;
  static constexpr uint32_t kChunkNodes = uint32_t{1} << kChunkBits;
  static constexpr uint32_t kInitialBits = 12;
  static constexpr uint64_t kMaxLoadNum = 1;
  static constexpr uint64_t kMaxLoadDen = 2;
  // In Node::link: the node has children besides its first.
  static constexpr uint32_t kBranch = uint32_t{1} << 31;

  struct Node {
    uint32_t parent;
    uint32_t link;  // first child (0: none yet) | kBranch
    uint64_t id;
  };

  const Node& record(uint32_t node) const {
    return static_cast<const Node*>(chunks_[node >> kChunkBits].data())[node & (kChunkNodes - 1)];
  }
  Node& record(uint32_t node) {
    return static_cast<Node*>(chunks_[node >> kChunkBits].data())[node & (kChunkNodes - 1)];
  }
  uint64_t* table() const { return static_cast<uint64_t*>(table_.data()); }
  uint64_t hash(uint32_t parent, uint64_t id) const;
  size_t home(uint64_t hash) const { return static_cast<size_t>((hash >> 32) >> (32 - bits_)); }
  // The child of `parent` along `id`, or 0.
  uint32_t find(uint32_t parent, uint64_t id) const;
  // Inserts ids[0..n) as a chain below `parent` (none of it present).
  void insertRun(uint32_t parent, const uint64_t* ids, size_t n, uint32_t* path);
  void allocateTable(uint32_t bits);
  static void place(uint64_t* table, size_t mask, size_t at, uint64_t slot);

  uint64_t seed_;
  std::vector<HugeBuffer> chunks_;
  HugeBuffer table_;
  uint32_t bits_ = 0;
  size_t mask_ = 0;
  uint64_t growAt_ = 0;
  uint64_t entries_ = 0;  // in the table
  uint64_t nodes_ = 1;
};

}  // namespace kvroute
