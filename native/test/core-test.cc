// core-test — a randomized differential stress test of the routing core
// (BlockIndex, matchMany, matchFleet, Router) against a per-block reference
// model, meant to run under AddressSanitizer + UBSan (scripts/core-test.sh,
// `npm run test:native`).
//
//   core-test [seed [scale]]
//
// With no arguments: the directed cases, then every phase for a fixed list of
// seeds. With a seed: the directed cases and that seed only. `scale`
// multiplies the operation counts (default 1). CORE_TEST_VERBOSE=1 prints
// every id of the operations shown on a failure.
//
// Directed cases: a request longer than the capacity, remove() inside a
// segment, a split at a non-strided depth then eviction of the tail, n = 0,
// shrink to 0 and clear() with a fleet attached; and (directed-non-chained)
// the smallest sequences the garbage phases found to break the index.
//
// Request scanner (scan-directed, scan-*): formatJsNumber against
// JavaScript's String(x), PromptHasher against hashPromptBlocks under random
// splits, and request-scan over generated bodies with random byte mutations
// (truncation, flips, insertions): the outcome is always one of the three, a
// strip leaves a body that scans ok with the same model and no hash_ids, and
// the sanitizers stay quiet on every error path (the differential test of
// exact results is test/request-scan.test.ts).
//
// Phases per seed:
//   block-index  several BlockIndex instances (four reporting to one
//                FleetIndex, one not) driven directly by chained multi-session
//                streams; every match(), matchMany() and matchFleet() result
//                is compared with the reference model, every commit / remove /
//                setCapacity return value too, and the whole held set is
//                compared every few operations.
//   router       kvroute::Router with a small fleet and one beyond
//                FleetIndex::kMaxInstances (so both matchFleet and matchMany
//                run), instances added / drained / removed / re-added, every
//                policy, dry runs, ticket events; route()'s matched[] is
//                compared with one reference model per instance. Instances
//                serve random model groups (or any, or none) that change
//                mid-run; a request names a group or none, and must land on a
//                candidate (routable, serving its group), with NaN scores for
//                the rest and no slot exactly when there is no candidate.
//   prefix-trie  kvroute::PrefixTrie (trace analysis) against a map-based
//                trie: sessions extending their prompt, forks, repeats, ids
//                from a small alphabet and full 64-bit ones; every walk()'s
//                return and path, then every node's parent and markedDepths.
//                Enough nodes and branches to add node chunks and grow the
//                table several times.
//   garbage-*    ids that are not chained (a small pool reused at any depth):
//                only "no crash, sanitizers quiet, checkInvariants() == "" and
//                results within [0, n]" is asserted, as the precondition of
//                exact results is chained ids.
//
// On a failure the phase stops, prints the seed, the step and the last
// operations, and the program exits non-zero after the remaining phases.
//
// Files: main() alone here; harness.h (the failure trail, CHECK, runPhase),
// rng.h (deterministic randomness), ref-index.h (the reference model),
// workload.h (request streams), index-checks.h, phases.h and one source per
// phase group (block-index-directed, block-index-phases, router-phase,
// scan-phases, prefix-trie-phase, event-index-phase).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "harness.h"
#include "phases.h"

using core_test::blockIndexPhase;
using core_test::directedCases;
using core_test::eventIndexPhase;
using core_test::g;
using core_test::garbageIndexPhase;
using core_test::nonChainedCases;
using core_test::prefixTriePhase;
using core_test::routerPhase;
using core_test::runPhase;
using core_test::scanDirectedCases;
using core_test::scanPhase;
using core_test::Totals;

int main(int argc, char** argv) {
  std::vector<uint64_t> seeds = {1, 2, 3, 4, 5};
  double scale = 1.0;
  if (argc > 1) seeds = {std::strtoull(argv[1], nullptr, 0)};
  if (argc > 2) scale = std::atof(argv[2]);
  auto count = [&](uint32_t base) { return static_cast<uint32_t>(std::max(1.0, base * scale)); };
  const auto start = std::chrono::steady_clock::now();

  runPhase("directed", 0, [](Totals& t) {
    directedCases();
    t.ops = g.step;
  });
  runPhase("directed-non-chained", 0, [](Totals& t) {
    nonChainedCases();
    t.ops = g.step;
  });
  runPhase("scan-directed", 0, [](Totals& t) {
    scanDirectedCases();
    t.ops = g.step;
  });
  for (uint64_t seed : seeds) {
    runPhase("block-index", seed, [&](Totals& t) { blockIndexPhase(seed, count(10000), t); });
    runPhase("router", seed, [&](Totals& t) { routerPhase(seed, count(6000), false, true, t); });
    runPhase("router-large-fleet", seed, [&](Totals& t) { routerPhase(seed, count(4000), true, true, t); });
    runPhase("garbage-block-index", seed, [&](Totals& t) { garbageIndexPhase(seed, count(8000), t); });
    runPhase("garbage-router", seed, [&](Totals& t) { routerPhase(seed, count(4000), seed % 2 == 0, false, t); });
    runPhase("scan", seed, [&](Totals& t) { scanPhase(seed, count(20000), t); });
    runPhase("prefix-trie", seed, [&](Totals& t) { prefixTriePhase(seed, count(20000), t); });
    runPhase("event-index", seed, [&](Totals& t) { eventIndexPhase(seed, count(20000), t); });
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (core_test::failedPhases() > 0) {
    std::printf("core-test: %d phase(s) FAILED (%.1f s)\n", core_test::failedPhases(), seconds);
    return 1;
  }
  std::printf("core-test: all phases passed (%.1f s)\n", seconds);
  return 0;
}
