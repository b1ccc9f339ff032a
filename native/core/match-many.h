// match-many — one request matched against every instance of the fleet in a
// single pass, so the cache misses of many searches overlap.
//
// Why it exists: a route() needs each instance's match length; doing the
// instances one after another would pay one chain of dependent cache misses
// per instance. Both functions interleave the searches' probes (prefetch all,
// then test all, per round) and finish with each instance's short walk along
// its runs (BlockIndex::extendFrom), whose segment and run are prefetched for
// all instances first.
//
// matchFleet bisects groups of instances on the FleetIndex's holder masks:
// about log2(n / kStride) probes per distinct match length, however many
// instances share it. matchMany runs one binary search per instance in
// lockstep; the router uses it for instances the fleet index does not track.
// Both give the same results as BlockIndex::match on each instance (for
// chained ids; see block-index.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/block-index.h"
#include "core/fleet-index.h"

namespace kvroute {

// out[k] receives the match length of ids[0..n) on indexes[k].
void matchMany(const BlockIndex* const* indexes, size_t count, const uint64_t* ids, uint32_t n, int32_t* out);

// `tracked` has the bits (slots) of the instances whose strided blocks
// `fleet` tracks, bySlot[bit] their indexes; matched[bit] receives each
// result (other entries are untouched).
void matchFleet(const FleetIndex& fleet, uint64_t tracked, const BlockIndex* const* bySlot, const uint64_t* ids,
                uint32_t n, int32_t* matched);

}  // namespace kvroute
