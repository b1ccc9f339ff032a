// xxhash64 — XXH64, the 64-bit xxHash by Yann Collet, written from its public
// specification (github.com/Cyan4973/xxHash, doc/xxhash_spec.md).
//
// Why it exists: prompt block ids, session keys and consistent-hash ring
// points must be the same in C++ and in the TypeScript reference, so the hash
// is a published, fully specified algorithm rather than std::hash.
//
// Complexity: O(len), one pass, no allocation. Reads are little-endian
// regardless of host byte order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvroute {

uint64_t xxhash64(const uint8_t* data, size_t len, uint64_t seed);

}  // namespace kvroute
