// The prefix-trie phase of core-test: kvroute::PrefixTrie (trace analysis)
// against a map from (parent, id) to node, numbered in insertion order.
// Sessions extend their prompt, fork and repeat, with ids from a small alphabet
// and full 64-bit ones; every walk()'s return and path is compared, then every
// node's parent and markedDepths. Enough nodes to add node chunks and grow the
// table several times.
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "harness.h"
#include "phases.h"
#include "rng.h"
#include "trie/prefix-trie.h"

namespace core_test {

void prefixTriePhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0x7E1EULL + 5);
  kvroute::PrefixTrie trie(seed);
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> children;
  std::vector<uint32_t> parents = {0};
  std::vector<std::vector<uint64_t>> sessions;
  auto id = [&]() -> uint64_t { return rng.percent(60) ? rng.below(24) : rng.next(); };
  std::vector<uint32_t> path;
  for (uint32_t op = 0; op < ops; ++op) {
    ++g.step;
    std::vector<uint64_t> ids;
    const uint64_t roll = rng.below(100);
    if (!sessions.empty() && roll < 55) {
      std::vector<uint64_t>& session = sessions[rng.below(sessions.size())];
      if (rng.percent(10)) session.resize(rng.below(session.size() + 1));
      for (uint64_t k = rng.below(40); k > 0; --k) session.push_back(id());
      ids = session;
    } else if (!sessions.empty() && roll < 70) {
      const std::vector<uint64_t>& from = rng.pick(sessions);
      ids.assign(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(rng.below(from.size() + 1)));
      for (uint64_t k = rng.below(8); k > 0; --k) ids.push_back(id());
      if (sessions.size() < 400) sessions.push_back(ids);
    } else {
      for (uint64_t k = rng.below(6); k > 0; --k) ids.push_back(rng.below(3));
      for (uint64_t k = rng.below(20); k > 0; --k) ids.push_back(id());
      if (sessions.size() < 400) sessions.push_back(ids);
    }
    note("walk", ids.data(), static_cast<uint32_t>(ids.size()));
    path.assign(ids.size() + 1, 0xDEAD);
    const uint32_t seen = trie.walk(ids.data(), ids.size(), path.data());
    uint32_t node = 0;
    uint32_t expectedSeen = 0;
    bool missing = false;
    for (size_t k = 0; k < ids.size(); ++k) {
      auto it = children.find({node, ids[k]});
      if (it == children.end()) {
        missing = true;
        const auto added = static_cast<uint32_t>(parents.size());
        children.emplace(std::make_pair(node, ids[k]), added);
        parents.push_back(node);
        node = added;
      } else {
        CHECK(!missing, "a node below a missing block");
        node = it->second;
        ++expectedSeen;
      }
      CHECK(path[k] == node, "path[" << k << "] = " << path[k] << ", expected " << node);
    }
    CHECK(path[ids.size()] == 0xDEAD, "walk() wrote past the path");
    CHECK(seen == expectedSeen, "walk() = " << seen << ", expected " << expectedSeen);
    CHECK(trie.size() == parents.size(), "size " << trie.size() << ", expected " << parents.size());
    ++totals.commits;
  }
  for (uint32_t node = 0; node < parents.size(); ++node) {
    CHECK(trie.parentOf(node) == parents[node], "parentOf(" << node << ")");
  }
  std::vector<uint8_t> counts(parents.size() - rng.below(10));
  for (uint8_t& c : counts) c = static_cast<uint8_t>(rng.below(4));
  std::vector<uint32_t> depth(parents.size());
  for (uint32_t min : {0u, 1u, 2u, 3u, 256u}) {
    trie.markedDepths(counts.data(), counts.size(), min, depth.data());
    for (uint32_t node = 1; node < parents.size(); ++node) {
      const uint32_t count = node < counts.size() ? counts[node] : 0;
      CHECK(depth[node] == depth[parents[node]] + (count >= min ? 1 : 0), "markedDepths at " << node);
    }
  }
  ++totals.fullChecks;
  CHECK(parents.size() > (ops >= 20000 ? 140000u : 0u), "too few nodes to add a chunk: " << parents.size());
  totals.ops += ops;
}

}  // namespace core_test
