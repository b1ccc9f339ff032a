// Checks shared by the core-test phases that drive BlockIndex: the whole held
// set against the reference model, the index's own invariants, and the label
// of an operation in the trail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/block-index.h"
#include "ref-index.h"

namespace core_test {

// The native index holds exactly the model's blocks: the same count, and
// every model leaf's whole path matched (so every model block is held).
void checkSameBlocks(const kvroute::BlockIndex& index, const RefIndex& ref, const char* who);

// BlockIndex::checkInvariants() is empty and segments never outnumber blocks.
void checkIndexInvariants(const kvroute::BlockIndex& index, const char* who);

// "op inst=<who> n=<n> [arg=<extra>]", for note().
std::string describe(const char* op, size_t who, uint32_t n, int64_t extra = -1);

}  // namespace core_test
