// The phases of core-test, one declaration each; main() (core-test.cc) runs
// them through runPhase(). Each fills the Totals it is given and reports a
// mismatch by CHECK(), which throws; the header of core-test.cc says what
// each phase asserts.
#pragma once

#include <cstdint>

#include "harness.h"

namespace core_test {

// block-index-directed.cc
void directedCases();
void nonChainedCases();

// block-index-phases.cc
void blockIndexPhase(uint64_t seed, uint32_t ops, Totals& totals);
void garbageIndexPhase(uint64_t seed, uint32_t ops, Totals& totals);

// router-phase.cc: with `exact`, chained ids compared with per-instance
// models; without, ids that are not chained and only safety asserted.
void routerPhase(uint64_t seed, uint32_t ops, bool largeFleet, bool exact, Totals& totals);

// scan-phases.cc
void scanDirectedCases();
void scanPhase(uint64_t seed, uint32_t ops, Totals& totals);

// prefix-trie-phase.cc
void prefixTriePhase(uint64_t seed, uint32_t ops, Totals& totals);

// event-index-phase.cc
void eventIndexPhase(uint64_t seed, uint32_t ops, Totals& totals);

}  // namespace core_test
