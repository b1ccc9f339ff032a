// token-keys — kvroute's own key for a block of token ids (docs/hashing.md,
// "Token block keys"), the key of the event-fed index.
//
// Why it exists: vLLM names cached blocks by a hash kvroute cannot reproduce
// (sha256 over pickle), but every BlockStored event carries the blocks' token
// ids. Keying both the events' blocks and a request's tokens by one published
// chained hash makes "does the engine hold this prefix" a key lookup.
//
// Definition: for tokens t[0..n) and block size bs only the floor(n / bs) full
// blocks are keyed. key[0] = XXH64(bytes(block 0), seed = bs) and key[k] =
// XXH64(bytes(block k), seed = key[k-1]), where bytes(block) are its bs token
// ids as 4 little-endian bytes each (u32). A chain that continues an earlier
// block (a BlockStored event whose parent is known) seeds block 0 with the
// parent's key instead of bs.
//
// Complexity: O(n), one XXH64 pass over the bytes, no allocation.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvroute {

// Writes floor(n / blockSize) chained keys to out (blockSize >= 1). With
// hasParent the first block's seed is parentKey, else blockSize. Returns the
// number of keys written.
size_t hashTokenBlocks(const uint32_t* tokens, size_t n, uint32_t blockSize, bool hasParent, uint64_t parentKey,
                       uint64_t* out);

// The key of one block of blockSize tokens, chained from `seed` (blockSize for
// a root block, else the parent's key).
uint64_t tokenBlockKey(const uint32_t* tokens, uint32_t blockSize, uint64_t seed);

}  // namespace kvroute
