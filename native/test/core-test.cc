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
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/block-index.h"
#include "core/event-index.h"
#include "core/fleet-index.h"
#include "core/match-many.h"
#include "core/router.h"
#include "hash/prompt-hash.h"
#include "hash/token-keys.h"
#include "scan/json-bytes.h"
#include "scan/json-text.h"
#include "scan/request-scan.h"
#include "trie/prefix-trie.h"

namespace {

using kvroute::BlockIndex;
using kvroute::FleetIndex;
using kvroute::PolicyKind;
using kvroute::Router;

// ---------------------------------------------------------------------------
// Failure reporting: a trail of the last operations, printed on failure.

struct Failure {
  std::string message;
};

struct OpRecord {
  uint64_t step;
  std::string what;
  std::vector<uint64_t> ids;
};

struct Context {
  std::string phase;
  uint64_t seed = 0;
  uint64_t step = 0;
  std::deque<OpRecord> trail;
};
Context g;
constexpr size_t kTrailLength = 16;

void note(std::string what, const uint64_t* ids = nullptr, uint32_t n = 0) {
  if (g.trail.size() == kTrailLength) g.trail.pop_front();
  g.trail.push_back(OpRecord{g.step, std::move(what), std::vector<uint64_t>(ids, ids + n)});
}

std::string formatIds(const std::vector<uint64_t>& ids) {
  const bool verbose = std::getenv("CORE_TEST_VERBOSE") != nullptr;
  std::ostringstream os;
  os << "n=" << ids.size() << " [";
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!verbose && ids.size() > 12 && k == 6) {
      os << " ...";
      k = ids.size() - 6;
    }
    os << (k == 0 ? "" : " ") << std::hex << "0x" << ids[k] << std::dec;
  }
  os << "]";
  return os.str();
}

[[noreturn]] void fail(const std::string& message, int line) {
  std::ostringstream os;
  os << "FAIL [" << g.phase << "] seed=" << g.seed << " step=" << g.step << " (core-test.cc:" << line
     << "): " << message << "\n  last operations (oldest first):\n";
  for (const OpRecord& r : g.trail) {
    os << "    #" << r.step << " " << r.what;
    if (!r.ids.empty()) os << " ids " << formatIds(r.ids);
    os << "\n";
  }
  throw Failure{os.str()};
}

#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      std::ostringstream check_os_;                             \
      check_os_ << "check `" #cond "` failed: " << __VA_ARGS__; \
      fail(check_os_.str(), __LINE__);                          \
    }                                                           \
  } while (0)

// ---------------------------------------------------------------------------
// Deterministic randomness (no <random> distributions: they differ between
// standard libraries).

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : next() % n; }
  // Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo + 1))); }
  bool percent(uint32_t p) { return below(100) < p; }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  uint64_t state_;
};

constexpr uint32_t kStride = BlockIndex::kStride;
constexpr uint32_t kMaxChain = 600;

// A length near a multiple of the stride (k*16 - 1, k*16, k*16 + 1), within [lo, hi].
uint32_t nearStride(Rng& rng, uint32_t lo, uint32_t hi) {
  const int64_t k = rng.range(0, hi / kStride + 1);
  const int64_t v = k * kStride + rng.range(-1, 1);
  return static_cast<uint32_t>(std::clamp<int64_t>(v, lo, hi));
}

uint32_t chainLength(Rng& rng) {
  switch (rng.below(4)) {
    case 0:
      return static_cast<uint32_t>(rng.range(1, 40));
    case 1:
      return nearStride(rng, 1, kMaxChain);
    case 2:
      return static_cast<uint32_t>(rng.range(1, kMaxChain));
    default:
      return static_cast<uint32_t>(rng.range(1, 200));
  }
}

uint32_t appendLength(Rng& rng) {
  static const std::vector<uint32_t> edges = {1, 2, 15, 16, 17, 31, 32, 33, 40};
  return rng.percent(50) ? static_cast<uint32_t>(rng.range(1, 40)) : rng.pick(edges);
}

// A cut point in [lo, size], often at a stride edge.
uint32_t cutPoint(Rng& rng, uint32_t lo, uint32_t size) {
  if (size <= lo) return size;
  return rng.percent(50) ? static_cast<uint32_t>(rng.range(lo, size)) : nearStride(rng, lo, size);
}

uint64_t pickCapacity(Rng& rng) {
  const uint64_t r = rng.below(100);
  if (r < 3) return rng.below(4);  // 0..3
  if (r < 18) {
    static const std::vector<uint64_t> edges = {15, 16, 17, 31, 32, 33, 47, 48, 49};
    return rng.pick(edges);
  }
  if (r < 58) return static_cast<uint64_t>(rng.range(20, 150));
  if (r < 93) return static_cast<uint64_t>(rng.range(150, 700));
  return static_cast<uint64_t>(rng.range(700, 2000));
}

// ---------------------------------------------------------------------------
// The reference model: src/core/reference/block-index.ts, block by block.
// One record per held block; `lru_` orders blocks from least to most recently
// used (the Map insertion order of the TypeScript twin).

class RefIndex {
 public:
  explicit RefIndex(uint64_t capacity) : capacity_(capacity) {}

  uint64_t capacity() const { return capacity_; }
  uint64_t size() const { return blocks_.size(); }

  bool holds(uint64_t id, uint32_t depth) const {
    auto it = blocks_.find(id);
    return it != blocks_.end() && it->second.depth == depth;
  }

  uint32_t match(const uint64_t* ids, uint32_t n) const {
    uint32_t matched = 0;
    while (matched < n && holds(ids[matched], matched)) ++matched;
    return matched;
  }

  // Touches ids[0..matched), inserts the rest, evicts to capacity.
  uint64_t commit(const uint64_t* ids, uint32_t n, uint32_t matched) {
    // An id already held elsewhere means the ids are not chained: stop there.
    uint32_t end = matched;
    while (end < n && blocks_.count(ids[end]) == 0) ++end;
    for (int64_t depth = static_cast<int64_t>(end) - 1; depth >= 0; --depth) {
      const uint64_t id = ids[depth];
      auto it = blocks_.find(id);
      if (it == blocks_.end()) {
        Block b;
        b.depth = static_cast<uint32_t>(depth);
        b.hasParent = depth > 0;
        b.parent = depth > 0 ? ids[depth - 1] : 0;
        it = blocks_.emplace(id, b).first;
      } else {
        lru_.erase(it->second.tick);
      }
      it->second.tick = ++tick_;
      lru_.emplace(tick_, id);
    }
    return evictToCapacity();
  }

  // Forgets each listed id that is held, with everything below it.
  uint64_t remove(const uint64_t* ids, uint32_t n) {
    uint64_t removed = 0;
    for (uint32_t k = 0; k < n; ++k) {
      if (blocks_.count(ids[k]) != 0) removed += removeSubtree(ids[k]);
    }
    return removed;
  }

  void clear() {
    blocks_.clear();
    lru_.clear();
  }

  uint64_t setCapacity(uint64_t capacity) {
    capacity_ = capacity;
    return evictToCapacity();
  }

  std::vector<uint64_t> heldIds() const {
    std::vector<uint64_t> out;
    out.reserve(lru_.size());
    for (const auto& [tick, id] : lru_) out.push_back(id);
    return out;
  }

  uint64_t stridedBlocks() const {
    uint64_t total = 0;
    for (const auto& [id, b] : blocks_) total += (b.depth % kStride == 0) ? 1 : 0;
    return total;
  }

  // The full path (ids[0..depth]) of every block that has no held child.
  // Chained ids only: checks the model's own prefix closure on the way.
  std::vector<std::vector<uint64_t>> leafPaths() const {
    std::unordered_set<uint64_t> parents;
    for (const auto& [id, b] : blocks_) {
      if (b.hasParent) parents.insert(b.parent);
    }
    std::vector<std::vector<uint64_t>> out;
    for (const auto& [id, b] : blocks_) {
      if (parents.count(id) != 0) continue;
      std::vector<uint64_t> path(b.depth + 1);
      uint64_t cur = id;
      for (int64_t d = b.depth; d >= 0; --d) {
        auto it = blocks_.find(cur);
        CHECK(it != blocks_.end() && it->second.depth == static_cast<uint32_t>(d),
              "reference model lost prefix closure at depth " << d << " of a leaf at depth " << b.depth);
        path[d] = cur;
        cur = it->second.parent;
      }
      out.push_back(std::move(path));
    }
    return out;
  }

 private:
  struct Block {
    uint32_t depth = 0;
    bool hasParent = false;
    uint64_t parent = 0;  // the id in front of this one when it was inserted
    uint64_t tick = 0;    // last use; the key of this block in lru_
  };

  uint64_t evictToCapacity() {
    uint64_t evicted = 0;
    while (blocks_.size() > capacity_) {
      auto oldest = lru_.begin();
      blocks_.erase(oldest->second);
      lru_.erase(oldest);
      ++evicted;
    }
    return evicted;
  }

  uint64_t removeSubtree(uint64_t root) {
    std::unordered_set<uint64_t> doomed{root};
    // Parents are always more recent than their children, so walking from the
    // most recent end decides every parent before its children.
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      const Block& b = blocks_.at(it->second);
      if (b.hasParent && doomed.count(b.parent) != 0) doomed.insert(it->second);
    }
    for (uint64_t id : doomed) {
      auto it = blocks_.find(id);
      lru_.erase(it->second.tick);
      blocks_.erase(it);
    }
    return doomed.size();
  }

  uint64_t capacity_;
  uint64_t tick_ = 0;
  std::unordered_map<uint64_t, Block> blocks_;
  std::map<uint64_t, uint64_t> lru_;  // tick -> id
};

// ---------------------------------------------------------------------------
// Chained multi-session request streams.

struct Request {
  std::vector<uint64_t> ids;
  uint64_t session = 0;
};

class Workload {
 public:
  Workload(Rng& rng, uint64_t salt) : rng_(rng), salt_(salt << 32) {
    // Shared system prefixes, one nested in another, lengths around the stride.
    static const std::vector<uint32_t> a = {1, 3, 15, 16};
    static const std::vector<uint32_t> b = {17, 31, 32, 33};
    static const std::vector<uint32_t> c = {15, 40, 64, 65};
    shared_.push_back(freshRun(rng_.pick(a)));
    shared_.push_back(shared_[0]);
    append(shared_[1], rng_.pick(b) - static_cast<uint32_t>(shared_[0].size()));
    shared_.push_back(freshRun(rng_.pick(c)));
    shared_.push_back(freshRun(static_cast<uint32_t>(rng_.range(100, 300))));
  }

  // A never-used id (chained ids are fresh per prefix).
  uint64_t fresh() { return salt_ | ++counter_; }

  Request next() {
    if (sessions_.empty() || rng_.percent(12)) return startSession();
    // Mostly the recent sessions, sometimes any.
    const size_t count = sessions_.size();
    const size_t index = rng_.percent(70) ? count - 1 - rng_.below(std::min<size_t>(count, 8)) : rng_.below(count);
    Session& s = sessions_[index];
    const uint64_t r = rng_.below(100);
    if (r < 55) {
      // Next turn: the previous prompt minus its partial last block, then new blocks.
      const size_t keep = s.prompt.empty() ? 0 : s.prompt.size() - 1;
      const uint32_t add = appendLength(rng_);
      if (keep + add > kMaxChain) return startSession();
      remember(s);
      s.prompt.resize(keep);
      append(s.prompt, add);
      return Request{s.prompt, s.key};
    }
    if (r < 65) return Request{s.prompt, s.key};  // a resend
    if (r < 77) {
      // A prefix of the prompt (possibly empty): touches without inserting.
      const uint32_t cut = cutPoint(rng_, 0, static_cast<uint32_t>(s.prompt.size()));
      return Request{std::vector<uint64_t>(s.prompt.begin(), s.prompt.begin() + cut), s.key};
    }
    if (r < 92) {
      // A branch (retry, edit) from an earlier prompt of the session.
      const std::vector<uint64_t> base = s.past.empty() || rng_.percent(30) ? s.prompt : rng_.pick(s.past);
      if (base.empty()) return startSession();
      const uint32_t cut = cutPoint(rng_, 1, static_cast<uint32_t>(base.size()));
      remember(s);
      s.prompt.assign(base.begin(), base.begin() + cut);
      append(s.prompt, std::min<uint32_t>(appendLength(rng_), kMaxChain - cut));
      return Request{s.prompt, s.key};
    }
    // A new session forked from this one's prompt (shares a long prefix).
    const std::vector<uint64_t> base = s.prompt;
    Session forked;
    forked.key = ++sessionCounter_;
    const uint32_t cut = cutPoint(rng_, 0, static_cast<uint32_t>(base.size()));
    forked.prompt.assign(base.begin(), base.begin() + cut);
    append(forked.prompt, std::min<uint32_t>(appendLength(rng_), kMaxChain - cut));
    return push(std::move(forked));
  }

  // An id from a recent prompt, at a random depth (held or not on any instance).
  uint64_t recentId() {
    if (sessions_.empty()) return fresh();
    const Session& s = sessions_[sessions_.size() - 1 - rng_.below(std::min<size_t>(sessions_.size(), 8))];
    if (s.prompt.empty()) return fresh();
    return s.prompt[rng_.below(s.prompt.size())];
  }

  uint64_t sessionCount() const { return sessionCounter_; }

 private:
  struct Session {
    uint64_t key = 0;
    std::vector<uint64_t> prompt;
    std::vector<std::vector<uint64_t>> past;
  };

  std::vector<uint64_t> freshRun(uint32_t n) {
    std::vector<uint64_t> v;
    append(v, n);
    return v;
  }
  void append(std::vector<uint64_t>& v, uint32_t n) {
    for (uint32_t k = 0; k < n; ++k) v.push_back(fresh());
  }
  void remember(Session& s) {
    if (s.prompt.empty()) return;
    if (s.past.size() == 4) s.past.erase(s.past.begin() + static_cast<std::ptrdiff_t>(rng_.below(4)));
    s.past.push_back(s.prompt);
  }

  Request startSession() {
    Session s;
    s.key = ++sessionCounter_;
    const uint32_t length = chainLength(rng_);
    if (rng_.percent(50)) {
      const std::vector<uint64_t>& prefix = rng_.pick(shared_);
      const uint32_t take = std::min<uint32_t>(length, static_cast<uint32_t>(prefix.size()));
      s.prompt.assign(prefix.begin(), prefix.begin() + take);
    }
    append(s.prompt, length - static_cast<uint32_t>(s.prompt.size()));
    return push(std::move(s));
  }

  Request push(Session s) {
    if (sessions_.size() == 48) sessions_.erase(sessions_.begin());
    sessions_.push_back(std::move(s));
    return Request{sessions_.back().prompt, sessions_.back().key};
  }

  Rng& rng_;
  uint64_t salt_;
  uint64_t counter_ = 0;
  uint64_t sessionCounter_ = 0;
  std::vector<std::vector<uint64_t>> shared_;
  std::vector<Session> sessions_;
};

// Requests whose ids are not chained: a small pool of ids reused at any
// depth, duplicates inside one request, chained requests with ids swapped in.
class GarbageWorkload {
 public:
  GarbageWorkload(Rng& rng, uint64_t salt) : rng_(rng), chained_(rng, salt) {
    for (int k = 0; k < 48; ++k) pool_.push_back(rng_.percent(50) ? rng_.next() : static_cast<uint64_t>(k));
  }

  uint64_t poolId() { return rng_.pick(pool_); }
  uint64_t anyId() { return rng_.percent(60) ? poolId() : chained_.recentId(); }

  Request next() {
    const uint64_t r = rng_.below(100);
    Request req;
    if (r < 30) {
      const uint32_t n = rng_.percent(70) ? static_cast<uint32_t>(rng_.range(0, 40)) : nearStride(rng_, 0, 200);
      for (uint32_t k = 0; k < n; ++k) req.ids.push_back(poolId());
      req.session = rng_.below(8);
      return req;
    }
    req = chained_.next();
    if (r < 80 && !req.ids.empty()) {
      const uint32_t edits = static_cast<uint32_t>(rng_.range(1, 6));
      for (uint32_t e = 0; e < edits; ++e) {
        const size_t at = rng_.percent(40) ? std::min<size_t>(req.ids.size() - 1, nearStride(rng_, 0, 600))
                                           : rng_.below(req.ids.size());
        switch (rng_.below(3)) {
          case 0:
            req.ids[at] = poolId();
            break;
          case 1:
            req.ids[at] = req.ids[rng_.below(req.ids.size())];
            break;  // same id at two depths
          default:
            req.ids[at] = chained_.recentId();
            break;  // an id of another chain
        }
      }
    } else if (r < 90 && req.ids.size() > 2) {
      // Shift: drop or duplicate one block, so the rest sits one depth off.
      const size_t at = rng_.below(req.ids.size());
      if (rng_.percent(50)) {
        req.ids.erase(req.ids.begin() + static_cast<std::ptrdiff_t>(at));
      } else {
        req.ids.insert(req.ids.begin() + static_cast<std::ptrdiff_t>(at), req.ids[at]);
      }
    }
    return req;
  }

 private:
  Rng& rng_;
  Workload chained_;
  std::vector<uint64_t> pool_;
};

// ---------------------------------------------------------------------------
// Shared checks.

// The native index holds exactly the model's blocks: the same count, and
// every model leaf's whole path matched (so every model block is held).
void checkSameBlocks(const BlockIndex& index, const RefIndex& ref, const char* who) {
  CHECK(index.blocks() == ref.size(), who << ": blocks() " << index.blocks() << " != model " << ref.size());
  CHECK(index.stridedBlocks() == ref.stridedBlocks(),
        who << ": stridedBlocks() " << index.stridedBlocks() << " != model " << ref.stridedBlocks());
  for (const std::vector<uint64_t>& path : ref.leafPaths()) {
    const uint32_t n = static_cast<uint32_t>(path.size());
    const uint32_t got = index.match(path.data(), n);
    if (got != n) note("leaf path", path.data(), n);
    CHECK(got == n, who << ": the model holds a path of " << n << " blocks, native match() = " << got);
  }
}

void checkIndexInvariants(const BlockIndex& index, const char* who) {
  const std::string err = index.checkInvariants();
  CHECK(err.empty(), who << ": BlockIndex::checkInvariants(): " << err);
  CHECK(index.segments() <= index.blocks(),
        who << ": " << index.segments() << " segments for " << index.blocks() << " blocks");
}

std::string describe(const char* op, size_t who, uint32_t n, int64_t extra = -1) {
  std::ostringstream os;
  os << op << " inst=" << who << " n=" << n;
  if (extra >= 0) os << " arg=" << extra;
  return os.str();
}

// ---------------------------------------------------------------------------
// Directed cases.

std::vector<uint64_t> chain(uint64_t from, uint32_t n, std::vector<uint64_t> prefix = {}) {
  for (uint32_t k = 0; k < n; ++k) prefix.push_back(from + k);
  return prefix;
}

void directedCases() {
  g.phase = "directed";
  g.seed = 0;
  g.step = 0;
  g.trail.clear();

  // A request longer than the capacity keeps its first `capacity` blocks, at
  // capacities around the stride.
  for (uint64_t capacity : {0u, 1u, 15u, 16u, 17u, 25u, 32u, 33u, 100u, 150u}) {
    ++g.step;
    note(describe("long request", 0, 150, static_cast<int64_t>(capacity)));
    BlockIndex index(capacity);
    RefIndex ref(capacity);
    const std::vector<uint64_t> ids = chain(1, 150);
    const uint64_t evicted = index.commit(ids.data(), 150, 0);
    CHECK(evicted == 150 - std::min<uint64_t>(capacity, 150), "capacity " << capacity << ": evicted " << evicted);
    CHECK(index.match(ids.data(), 150) == std::min<uint64_t>(capacity, 150),
          "capacity " << capacity << ": match " << index.match(ids.data(), 150));
    ref.commit(ids.data(), 150, 0);
    checkIndexInvariants(index, "long");
    checkSameBlocks(index, ref, "long");
  }

  // remove() of a block deep inside a segment removes exactly it and every
  // block below it, including branches and at strided / head / plain depths.
  for (uint32_t at : {1u, 7u, 15u, 16u, 17u, 37u, 48u, 49u, 63u, 64u, 99u}) {
    ++g.step;
    BlockIndex index(1000);
    RefIndex ref(1000);
    const std::vector<uint64_t> trunk = chain(1, 100);
    const std::vector<uint64_t> branch = chain(5000, 20, std::vector<uint64_t>(trunk.begin(), trunk.begin() + 50));
    note(describe("remove inside a segment", 0, 100, at), trunk.data(), 100);
    for (const std::vector<uint64_t>* r : {&trunk, &branch}) {
      const uint32_t n = static_cast<uint32_t>(r->size());
      index.commit(r->data(), n, index.match(r->data(), n));
      ref.commit(r->data(), n, ref.match(r->data(), n));
    }
    const uint64_t id = trunk[at];
    const uint64_t expected = (100 - at) + (at < 50 ? 20 : 0);
    const uint64_t removed = index.remove(&id, 1);
    CHECK(removed == expected, "remove at depth " << at << ": removed " << removed << ", expected " << expected);
    CHECK(ref.remove(&id, 1) == expected, "model remove at depth " << at);
    CHECK(index.match(trunk.data(), 100) == at, "trunk match after remove at " << at);
    const uint32_t branchMatch = index.match(branch.data(), 70);
    CHECK(branchMatch == (at < 50 ? at : 70), "branch match " << branchMatch << " after remove at " << at);
    CHECK(index.remove(&id, 1) == 0, "removing it again");
    checkIndexInvariants(index, "remove");
    checkSameBlocks(index, ref, "remove");
  }

  // A split at a non-strided depth, then eviction of the tail: first part of
  // it, then exactly all of it, then more; then the head extends again.
  for (uint32_t split : {1u, 5u, 15u, 17u, 21u, 31u, 33u}) {
    ++g.step;
    note(describe("split then evict the tail", 0, 40, split));
    const uint64_t capacity = 40;
    BlockIndex index(capacity);
    RefIndex ref(capacity);
    auto run = [&](const std::vector<uint64_t>& ids) {
      const uint32_t n = static_cast<uint32_t>(ids.size());
      const uint32_t m = index.match(ids.data(), n);
      CHECK(m == ref.match(ids.data(), n), "split " << split << ": match " << m);
      const uint64_t e = index.commit(ids.data(), n, m);
      CHECK(e == ref.commit(ids.data(), n, m), "split " << split << ": evicted " << e);
      checkIndexInvariants(index, "split");
      checkSameBlocks(index, ref, "split");
    };
    const std::vector<uint64_t> a = chain(1, 40);
    run(a);
    run(std::vector<uint64_t>(a.begin(), a.begin() + split));  // split before `split`; the tail is older
    const uint32_t tail = 40 - split;
    run(chain(1000, tail / 2));  // evicts half the tail
    CHECK(index.match(a.data(), 40) == 40 - tail / 2, "split " << split << ": half the tail evicted");
    run(std::vector<uint64_t>(a.begin(), a.begin() + split));
    run(chain(2000, tail - tail / 2));  // evicts exactly the rest of the tail
    CHECK(index.match(a.data(), 40) == split,
          "split " << split << ": tail fully evicted, match " << index.match(a.data(), 40));
    run(a);  // extends the head's run again (it has no child left)
    CHECK(index.match(a.data(), 40) == 40, "split " << split << ": re-extended");
  }

  // An empty request: matches nothing everywhere and commits nothing.
  {
    ++g.step;
    note("empty request");
    FleetIndex fleet;
    BlockIndex index(10);
    index.attachFleet(&fleet, 3);
    const std::vector<uint64_t> ids = chain(1, 5);
    index.commit(ids.data(), 5, 0);
    const std::vector<uint64_t> empty;
    CHECK(index.match(empty.data(), 0) == 0, "match of n = 0");
    CHECK(index.commit(empty.data(), 0, 0) == 0, "commit of n = 0");
    CHECK(index.blocks() == 5, "blocks after an empty commit");
    const BlockIndex* all[] = {&index};
    int32_t out[1] = {-5};
    kvroute::matchMany(all, 1, empty.data(), 0, out);
    CHECK(out[0] == 0, "matchMany of n = 0: " << out[0]);
    const BlockIndex* bySlot[FleetIndex::kMaxInstances] = {};
    bySlot[3] = &index;
    int32_t matched[FleetIndex::kMaxInstances];
    std::fill(matched, matched + FleetIndex::kMaxInstances, -5);
    kvroute::matchFleet(fleet, uint64_t{1} << 3, bySlot, empty.data(), 0, matched);
    CHECK(matched[3] == 0 && matched[2] == -5, "matchFleet of n = 0");
    checkIndexInvariants(index, "empty");

    kvroute::RouterConfig config;
    config.manualClock = true;
    Router router(config);
    router.addInstance("a", 10);
    router.addInstance("b", 10);
    for (int32_t kind = 0; kind < kvroute::kPolicyKindCount; ++kind) {
      kvroute::PolicyConfig policy;
      policy.kind = static_cast<PolicyKind>(kind);
      router.setPolicy(policy);
      for (bool hasSession : {false, true}) {
        kvroute::RouteInput in;
        in.ids = empty.data();
        in.n = 0;
        in.hasSession = hasSession;
        in.sessionKey = 7;
        int32_t m[2];
        double scores[2];
        const kvroute::RouteOutput out = router.route(in, m, scores);
        CHECK(out.slot >= 0 && m[0] == 0 && m[1] == 0, "route of n = 0, policy " << kind);
      }
    }
    CHECK(router.checkInvariants().empty(), router.checkInvariants());
  }

  // ringFirstTurn: two replicas that added the same instances in opposite
  // orders (so different slots) and carry different loads send every new
  // session to the same instance by name; a session a replica has placed
  // follows the policy there.
  {
    ++g.step;
    note("ringFirstTurn across two replicas");
    const std::vector<std::string> names = {"e0", "e1", "e2", "e3", "e4"};
    kvroute::RouterConfig config;
    config.manualClock = true;
    config.policy.kind = PolicyKind::kMinTtft;
    config.policy.ringFirstTurn = true;
    Router a(config);
    Router b(config);
    for (size_t k = 0; k < names.size(); ++k) {
      a.addInstance(names[k], 100);
      b.addInstance(names[names.size() - 1 - k], 100);
    }
    const std::vector<uint64_t> ids = {11, 12, 13};
    std::vector<int32_t> m(names.size());
    std::vector<double> scores(names.size());
    kvroute::RouteInput load;
    load.ids = ids.data();
    load.n = 3;
    load.inputTokens = 48;
    for (int k = 0; k < 3; ++k) b.route(load, m.data(), scores.data());  // no session: placed by load
    std::vector<bool> used(names.size(), false);
    for (uint64_t session = 1; session <= 200; ++session) {
      kvroute::RouteInput in = load;
      in.hasSession = true;
      in.sessionKey = session * 0x9E3779B97F4A7C15ULL;
      const kvroute::RouteOutput ra = a.route(in, m.data(), scores.data());
      const kvroute::RouteOutput rb = b.route(in, m.data(), scores.data());
      CHECK(
          ra.reason == kvroute::Reason::kRingFirstTurn && rb.reason == kvroute::Reason::kRingFirstTurn,
          "session " << session << ": reasons " << static_cast<int>(ra.reason) << ", " << static_cast<int>(rb.reason));
      CHECK(ra.slot >= 0 && rb.slot == static_cast<int32_t>(names.size()) - 1 - ra.slot,
            "session " << session << ": replica a chose slot " << ra.slot << ", b slot " << rb.slot);
      used[ra.slot] = true;
      const kvroute::RouteOutput again = a.route(in, m.data(), scores.data());
      CHECK(again.reason != kvroute::Reason::kRingFirstTurn, "session " << session << ": ring placed it twice");
    }
    CHECK(std::count(used.begin(), used.end(), true) == static_cast<long>(names.size()),
          "200 sessions did not reach every instance");
    CHECK(a.sessionCount() == 200 && b.sessionCount() == 200,
          "entries " << a.sessionCount() << ", " << b.sessionCount());
    CHECK(a.checkInvariants().empty() && b.checkInvariants().empty(), a.checkInvariants() << b.checkInvariants());
  }

  // A shrink to zero and a clear with a fleet attached leave no fleet bits.
  {
    ++g.step;
    note("shrink to 0, clear");
    FleetIndex fleet;
    {
      BlockIndex index(500);
      index.attachFleet(&fleet, 55);
      const std::vector<uint64_t> ids = chain(1, 300);
      index.commit(ids.data(), 300, 0);
      CHECK(fleet.bits() == index.stridedBlocks() && fleet.bits() == 19, "fleet bits " << fleet.bits());
      CHECK(index.setCapacity(0) == 300, "setCapacity(0)");
      CHECK(fleet.bits() == 0 && fleet.size() == 0, "fleet bits after shrink " << fleet.bits());
      index.setCapacity(500);
      index.commit(ids.data(), 300, 0);
      index.clear();
      CHECK(fleet.bits() == 0 && index.blocks() == 0, "after clear");
      index.commit(ids.data(), 300, 0);
      checkIndexInvariants(index, "clear");
    }
    CHECK(fleet.bits() == 0, "fleet bits after the index was destroyed: " << fleet.bits());
  }
}

// Directed cases with ids that are not chained. Only consistency is asserted
// (block-index.h: "Ids that are not chained never corrupt the index"): each
// sequence is the smallest found by the garbage phases for its failure.
void nonChainedCases() {
  g.phase = "directed-non-chained";
  g.seed = 0;
  g.step = 0;
  g.trail.clear();
  auto run = [](BlockIndex& index, const std::vector<uint64_t>& ids) {
    ++g.step;
    const uint32_t n = static_cast<uint32_t>(ids.size());
    const uint32_t m = index.match(ids.data(), n);
    CHECK(m <= n, "match " << m << " > n " << n);
    note(describe("commit", 0, n, m), ids.data(), n);
    index.commit(ids.data(), n, m);
    checkIndexInvariants(index, "non-chained");
  };

  // A split where the block at the split depth (a plain run entry) has an id
  // that is indexed elsewhere: the new segment head cannot be indexed.
  {
    BlockIndex index(100);
    run(index, {100});     // X at depth 0, indexed
    run(index, {1, 100});  // X again at depth 1, inside a run
    run(index, {1, 2});    // split before depth 1
    const uint64_t a = 1;
    ++g.step;
    note("remove [0x1]");
    index.remove(&a, 1);
    checkIndexInvariants(index, "non-chained");
    const uint64_t x = 100;
    CHECK(index.match(&x, 1) == 1, "[X] at depth 0 is held but match() = " << index.match(&x, 1));
  }

  // The same id at strided depth 16 and at depth 17; a split before 17, the
  // tail evicted, then a split above depth 16 (which must re-point the
  // depth-16 entry).
  {
    BlockIndex index(100);
    std::vector<uint64_t> r1 = chain(1000, 16);
    std::vector<uint64_t> r2 = r1;
    r1.push_back(7);
    r1.push_back(7);
    r2.push_back(7);
    r2.push_back(99);
    run(index, r1);
    run(index, r2);
    ++g.step;
    note("setCapacity(18)");
    index.setCapacity(18);
    checkIndexInvariants(index, "non-chained");
    run(index, {1000, 1001, 1002, 1003, 1004, 55});
  }
}

// ---------------------------------------------------------------------------
// Phase: BlockIndex instances driven directly, chained ids.

struct Totals {
  uint64_t ops = 0, commits = 0, evicted = 0, removed = 0, fullChecks = 0, maxSegments = 0, offloads = 0;
};

void blockIndexPhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0x9E3779B97F4A7C15ULL + 11);
  Workload wl(rng, 0xB10C0000 + seed);
  FleetIndex fleet;  // before the indexes: they withdraw from it when destroyed
  struct Inst {
    std::unique_ptr<BlockIndex> index;
    std::unique_ptr<RefIndex> ref;
    int32_t bit;  // -1: not reporting to the fleet
  };
  std::vector<Inst> insts;
  const int32_t bits[] = {0, 1, 9, 55, -1};
  for (int32_t bit : bits) {
    const uint64_t capacity = pickCapacity(rng);
    Inst inst{std::make_unique<BlockIndex>(capacity), std::make_unique<RefIndex>(capacity), bit};
    if (bit >= 0) inst.index->attachFleet(&fleet, static_cast<uint32_t>(bit));
    insts.push_back(std::move(inst));
  }
  uint64_t tracked = 0;
  const BlockIndex* bySlot[FleetIndex::kMaxInstances] = {};
  std::vector<const BlockIndex*> all;
  for (const Inst& inst : insts) {
    all.push_back(inst.index.get());
    if (inst.bit >= 0) {
      tracked |= uint64_t{1} << inst.bit;
      bySlot[inst.bit] = inst.index.get();
    }
  }
  std::vector<int32_t> manyOut(insts.size());
  int32_t fleetOut[FleetIndex::kMaxInstances];

  auto fleetCheck = [&]() {
    size_t reported = 0;
    for (const Inst& inst : insts) {
      if (inst.bit >= 0) reported += inst.index->stridedBlocks();
    }
    CHECK(fleet.bits() == reported, "fleet holds " << fleet.bits() << " bits, instances report " << reported);
  };

  for (g.step = 1; g.step <= ops; ++g.step) {
    const uint64_t r = rng.below(100);
    const size_t who = rng.below(insts.size());
    Inst& inst = insts[who];
    if (r < 78) {
      const Request req = wl.next();
      const uint32_t n = static_cast<uint32_t>(req.ids.size());
      const uint64_t* ids = req.ids.data();
      // Mostly session-affine, so prompts find their prefixes.
      const size_t target = rng.percent(75) ? req.session % insts.size() : who;
      const bool inflate = n > 0 && rng.percent(3);
      note(describe(inflate ? "commit(inflated matched)" : "commit", target, n), ids, n);
      // Every instance's match, three ways.
      std::vector<uint32_t> expected(insts.size());
      for (size_t k = 0; k < insts.size(); ++k) {
        expected[k] = insts[k].ref->match(ids, n);
        const uint32_t got = insts[k].index->match(ids, n);
        CHECK(got == expected[k], "instance " << k << ": match() = " << got << ", model " << expected[k]);
      }
      kvroute::matchMany(all.data(), all.size(), ids, n, manyOut.data());
      for (size_t k = 0; k < insts.size(); ++k) {
        CHECK(manyOut[k] == static_cast<int32_t>(expected[k]),
              "instance " << k << ": matchMany = " << manyOut[k] << ", model " << expected[k]);
      }
      std::fill(fleetOut, fleetOut + FleetIndex::kMaxInstances, -7);
      kvroute::matchFleet(fleet, tracked, bySlot, ids, n, fleetOut);
      for (uint32_t b = 0; b < FleetIndex::kMaxInstances; ++b) {
        int32_t want = -7;
        for (size_t k = 0; k < insts.size(); ++k) {
          if (insts[k].bit == static_cast<int32_t>(b)) want = static_cast<int32_t>(expected[k]);
        }
        CHECK(fleetOut[b] == want, "bit " << b << ": matchFleet = " << fleetOut[b] << ", expected " << want);
      }
      // Commit on the target.
      Inst& t = insts[target];
      uint32_t passed = expected[target];
      if (inflate && passed < n) passed = static_cast<uint32_t>(rng.range(passed + 1, n));
      const uint64_t evicted = t.index->commit(ids, n, passed);
      const uint64_t wantEvicted = t.ref->commit(ids, n, expected[target]);
      CHECK(evicted == wantEvicted, "instance " << target << ": commit(matched=" << passed << ") evicted " << evicted
                                                << ", model " << wantEvicted);
      const uint32_t after = t.index->match(ids, n);
      CHECK(after == t.ref->match(ids, n),
            "instance " << target << ": match after commit " << after << ", model " << t.ref->match(ids, n));
      CHECK(after == std::min<uint64_t>(n, t.ref->capacity()),
            "instance " << target << ": after commit the request holds " << after << " of " << n << " (capacity "
                        << t.ref->capacity() << ")");
      ++totals.commits;
      totals.evicted += evicted;
      checkIndexInvariants(*t.index, "commit");
      CHECK(t.index->blocks() == t.ref->size() && t.index->blocks() <= t.index->capacity(),
            "instance " << target << ": blocks " << t.index->blocks() << ", model " << t.ref->size());
      totals.maxSegments = std::max<uint64_t>(totals.maxSegments, t.index->segments());
    } else if (r < 88) {
      // remove() of a mix of held and other ids.
      std::vector<uint64_t> list;
      const std::vector<uint64_t> held = inst.ref->heldIds();
      const uint32_t count = static_cast<uint32_t>(rng.range(0, 6));
      for (uint32_t k = 0; k < count; ++k) {
        const uint64_t kind = rng.below(10);
        if (kind < 5 && !held.empty()) {
          list.push_back(rng.pick(held));
        } else if (kind < 8) {
          list.push_back(wl.recentId());
        } else {
          list.push_back(wl.fresh());
        }
      }
      note(describe("remove", who, count), list.data(), count);
      const uint64_t removed = inst.index->remove(list.data(), count);
      const uint64_t want = inst.ref->remove(list.data(), count);
      CHECK(removed == want, "instance " << who << ": remove() = " << removed << ", model " << want);
      totals.removed += removed;
      checkIndexInvariants(*inst.index, "remove");
      checkSameBlocks(*inst.index, *inst.ref, "remove");
    } else if (r < 95) {
      const uint64_t capacity = rng.percent(50) ? pickCapacity(rng) : inst.ref->capacity() / 2 + rng.below(40);
      note(describe("setCapacity", who, 0, static_cast<int64_t>(capacity)));
      const uint64_t evicted = inst.index->setCapacity(capacity);
      const uint64_t want = inst.ref->setCapacity(capacity);
      CHECK(evicted == want, "instance " << who << ": setCapacity evicted " << evicted << ", model " << want);
      CHECK(inst.index->capacity() == capacity, "capacity()");
      checkIndexInvariants(*inst.index, "setCapacity");
      checkSameBlocks(*inst.index, *inst.ref, "setCapacity");
    } else if (r < 96) {
      note(describe("clear", who, 0));
      inst.index->clear();
      inst.ref->clear();
      checkIndexInvariants(*inst.index, "clear");
      CHECK(inst.index->blocks() == 0, "blocks after clear");
    } else {
      // A full comparison of one instance.
      note(describe("full check", who, 0));
      checkSameBlocks(*inst.index, *inst.ref, "full");
      ++totals.fullChecks;
    }
    if (g.step % 16 == 0) {
      fleetCheck();
      checkSameBlocks(*insts[g.step / 16 % insts.size()].index, *insts[g.step / 16 % insts.size()].ref, "periodic");
      ++totals.fullChecks;
    }
  }
  ++g.step;
  note("final check");
  for (const Inst& inst : insts) {
    checkIndexInvariants(*inst.index, "final");
    checkSameBlocks(*inst.index, *inst.ref, "final");
  }
  fleetCheck();
  totals.ops += ops;
}

// ---------------------------------------------------------------------------
// Phase: Router, chained ids.

struct SlotModel {
  bool live = false;
  bool drained = false;
  bool wildcard = true;          // serves any group
  std::vector<uint32_t> groups;  // otherwise these
  bool serves(int32_t group) const {
    return group < 0 || wildcard ||
           std::find(groups.begin(), groups.end(), static_cast<uint32_t>(group)) != groups.end();
  }
  uint64_t incarnation = 0;
  std::unique_ptr<RefIndex> ref;
  uint64_t routed = 0, completed = 0, aborted = 0;
};

struct TicketModel {
  double ticket;
  uint32_t slot;
  uint64_t incarnation;
  bool open;
};

kvroute::PolicyConfig randomPolicy(Rng& rng, int32_t kind) {
  kvroute::PolicyConfig p;
  p.kind = static_cast<PolicyKind>(kind);
  static const std::vector<double> thresholds = {0.0, 0.3, 0.5, 0.9, 1.0};
  static const std::vector<double> overloads = {1.0, 1.5, 2.0, 100.0};
  static const std::vector<double> decode = {0.0, 0.5, 1.0};
  static const std::vector<uint32_t> vnodes = {1, 8, 160};
  p.affinityThreshold = rng.pick(thresholds);
  p.overloadFactor = rng.pick(overloads);
  p.decodeWeight = rng.pick(decode);
  p.ringVnodes = rng.pick(vnodes);
  p.ringFirstTurn = rng.percent(50);
  // The offload layer on half the policies, with thresholds a short request
  // crosses and transfers cheap enough to win now and then.
  static const std::vector<double> offloadThresholds = {0.0, 100.0, 1000.0};
  static const std::vector<double> coldPenalties = {0.0, 140.0};
  p.offload = rng.percent(50);
  p.offloadCost.thresholdTokens = rng.pick(offloadThresholds);
  p.offloadCost.coldPenaltyMs = rng.pick(coldPenalties);
  p.offloadCost.layerwise = rng.percent(50);
  p.offloadCost.chargePrefill = rng.percent(50);
  return p;
}

// Drives a Router, chained or not. With `exact`, every matched length and
// block count is compared with the per-instance models.
void routerPhase(uint64_t seed, uint32_t ops, bool largeFleet, bool exact, Totals& totals) {
  Rng rng(seed * 0xD1B54A32D192ED03ULL + (largeFleet ? 7 : 3) + (exact ? 0 : 100));
  Workload wl(rng, 0x7000 + seed * 4 + (largeFleet ? 1 : 0));
  GarbageWorkload garbage(rng, 0x9000 + seed * 4 + (largeFleet ? 1 : 0));
  kvroute::RouterConfig config;
  config.manualClock = true;
  config.maxSessions = rng.percent(50) ? 16 : 1u << 20;
  config.stalenessMs = 1000;
  int32_t kind = static_cast<int32_t>(rng.below(kvroute::kPolicyKindCount));
  config.policy = randomPolicy(rng, kind);
  Router router(config);
  double nowMs = 1e6;
  router.setTime(nowMs);

  std::vector<SlotModel> slots;
  std::vector<TicketModel> tickets;
  uint64_t incarnations = 0;
  uint64_t committed = 0;
  uint64_t openTickets = 0;
  uint64_t names = 0;

  auto liveSlots = [&]() {
    std::vector<uint32_t> out;
    for (uint32_t s = 0; s < slots.size(); ++s) {
      if (slots[s].live) out.push_back(s);
    }
    return out;
  };
  auto addInstance = [&]() {
    const uint64_t capacity = pickCapacity(rng);
    uint32_t expectedSlot = 0;
    while (expectedSlot < slots.size() && slots[expectedSlot].live) ++expectedSlot;
    // Names repeat now and then (a re-added instance keeps its ring points).
    const std::string name = "engine-" + std::to_string(rng.percent(20) && names > 0 ? rng.below(names) : names++);
    note(describe("addInstance", expectedSlot, 0, static_cast<int64_t>(capacity)));
    const uint32_t slot = router.addInstance(name, capacity);
    CHECK(slot == expectedSlot, "addInstance took slot " << slot << ", lowest free is " << expectedSlot);
    if (slot == slots.size()) slots.emplace_back();
    SlotModel& m = slots[slot];
    m = SlotModel();
    m.live = true;
    m.incarnation = ++incarnations;
    m.ref = std::make_unique<RefIndex>(capacity);
    CHECK(router.slotCount() == slots.size(), "slotCount " << router.slotCount());
    return slot;
  };
  // Random groups for a slot: any (wildcard), none, or one to three of 0..4
  // (duplicates included: the router drops them).
  auto setGroups = [&](uint32_t s) {
    SlotModel& m = slots[s];
    m.wildcard = rng.percent(30);
    m.groups.clear();
    const uint32_t count = m.wildcard || rng.percent(15) ? 0 : static_cast<uint32_t>(rng.range(1, 3));
    for (uint32_t k = 0; k < count; ++k) m.groups.push_back(static_cast<uint32_t>(rng.below(5)));
    note(describe("setInstanceGroups", s, count, m.wildcard ? 1 : 0));
    router.setInstanceGroups(s, m.wildcard, m.groups.data(), count);
    std::sort(m.groups.begin(), m.groups.end());
    m.groups.erase(std::unique(m.groups.begin(), m.groups.end()), m.groups.end());
    CHECK(router.isWildcard(s) == m.wildcard && router.instanceGroups(s) == m.groups, "slot " << s << ": groups");
  };
  auto checkSlot = [&](uint32_t s) {
    const SlotModel& m = slots[s];
    CHECK(router.isLive(s) == m.live, "slot " << s << ": isLive");
    if (!m.live) return;
    CHECK(router.isDrained(s) == m.drained, "slot " << s << ": isDrained");
    const kvroute::InstanceStats st = router.stats(s);
    CHECK(st.capacityBlocks == m.ref->capacity(), "slot " << s << ": capacity " << st.capacityBlocks);
    CHECK(st.blocks <= st.capacityBlocks, "slot " << s << ": " << st.blocks << " blocks over capacity");
    CHECK(st.routed == m.routed && st.completed == m.completed && st.aborted == m.aborted,
          "slot " << s << ": routed/completed/aborted " << st.routed << "/" << st.completed << "/" << st.aborted
                  << ", model " << m.routed << "/" << m.completed << "/" << m.aborted);
    if (exact)
      CHECK(st.blocks == m.ref->size(), "slot " << s << ": blocks " << st.blocks << ", model " << m.ref->size());
  };
  // Every model block held by the router's instance in slot s.
  auto fullCheck = [&](uint32_t s) {
    const SlotModel& m = slots[s];
    std::vector<int32_t> matched(router.slotCount());
    for (const std::vector<uint64_t>& path : m.ref->leafPaths()) {
      const uint32_t n = static_cast<uint32_t>(path.size());
      router.match(path.data(), n, matched.data());
      if (matched[s] != static_cast<int32_t>(n)) note("leaf path", path.data(), n);
      CHECK(matched[s] == static_cast<int32_t>(n),
            "slot " << s << ": the model holds a path of " << n << " blocks, router matched " << matched[s]);
    }
    ++totals.fullChecks;
  };
  auto routerInvariants = [&]() {
    const std::string err = router.checkInvariants();
    CHECK(err.empty(), "Router::checkInvariants(): " << err);
    CHECK(router.openTickets() == openTickets, "openTickets " << router.openTickets() << ", model " << openTickets);
  };

  const uint32_t initial =
      largeFleet ? static_cast<uint32_t>(rng.range(57, 61)) : static_cast<uint32_t>(rng.range(1, 6));
  for (uint32_t k = 0; k < initial; ++k) {
    const uint32_t s = addInstance();
    if (rng.percent(50)) setGroups(s);
  }
  routerInvariants();

  for (g.step = 1; g.step <= ops; ++g.step) {
    uint64_t r = rng.below(1000);
    const std::vector<uint32_t> live = liveSlots();
    std::vector<uint32_t> routable, drained;
    for (uint32_t s : live) (slots[s].drained ? drained : routable).push_back(s);
    // Keep the fleet alive: with nothing routable, add an instance more often
    // than not (a route then still checks the "no instance" answer sometimes).
    if (routable.empty() && rng.percent(60)) r = 820;
    const bool adding = r >= 810 && r < 830;
    if (r < 700 || (live.empty() && !adding)) {
      const Request req = exact ? wl.next() : garbage.next();
      const uint32_t n = static_cast<uint32_t>(req.ids.size());
      kvroute::RouteInput in;
      in.ids = req.ids.data();
      in.n = n;
      in.blockTokens = 16;
      in.inputTokens = std::max<double>(0, n * 16.0 - static_cast<double>(rng.below(16)));
      in.hasSession = rng.percent(80);
      in.sessionKey = req.session;
      in.group = rng.percent(40) ? -1 : static_cast<int32_t>(rng.below(router.groupCount()));
      in.dryRun = rng.percent(15);
      const bool matchOnly = rng.percent(5);
      note(std::string(matchOnly   ? "match"
                       : in.dryRun ? "route(dry)"
                                   : "route") +
               " policy=" + std::to_string(kind) + " group=" + std::to_string(in.group) +
               " session=" + (in.hasSession ? std::to_string(req.session) : "none"),
           req.ids.data(), n);
      std::vector<int32_t> matched(router.slotCount(), -9);
      std::vector<double> scores(router.slotCount(), -9);
      kvroute::RouteOutput out;
      if (matchOnly) {
        router.match(in.ids, n, matched.data());
      } else {
        out = router.route(in, matched.data(), scores.data());
      }
      size_t routable = 0;
      for (uint32_t s = 0; s < slots.size(); ++s) {
        const SlotModel& m = slots[s];
        if (!m.live) {
          CHECK(matched[s] == -1, "slot " << s << " (free): matched " << matched[s]);
          continue;
        }
        CHECK(matched[s] >= 0 && matched[s] <= static_cast<int32_t>(n),
              "slot " << s << ": matched " << matched[s] << " of " << n);
        if (exact) {
          const uint32_t want = m.ref->match(in.ids, n);
          CHECK(matched[s] == static_cast<int32_t>(want),
                "slot " << s << ": matched " << matched[s] << ", model " << want);
        }
        const bool candidate = !m.drained && m.serves(in.group);
        if (candidate) ++routable;
        if (!matchOnly && !candidate)
          CHECK(std::isnan(scores[s]), "slot " << s << " (not a candidate): score " << scores[s]);
      }
      if (matchOnly) continue;
      CHECK((out.slot >= 0) == (routable > 0),
            "route chose slot " << out.slot << " with " << routable << " candidates");
      if (out.slot < 0) {
        CHECK(out.ticket == -1, "ticket " << out.ticket << " without a slot");
        continue;
      }
      CHECK(out.reason != kvroute::Reason::kRingFirstTurn || (router.policy().ringFirstTurn && in.hasSession),
            "ring_first_turn without ringFirstTurn or a session");
      SlotModel& chosen = slots[out.slot];
      CHECK(chosen.live && !chosen.drained && chosen.serves(in.group),
            "route chose slot " << out.slot << ", which is not a candidate of group " << in.group);
      if (kind == static_cast<int32_t>(PolicyKind::kUnified) ||
          kind == static_cast<int32_t>(PolicyKind::kUnifiedKvBoth)) {
        if (out.reason == kvroute::Reason::kAffinity) {
          for (uint32_t s = 0; s < slots.size(); ++s) {
            if (slots[s].live && !slots[s].drained && slots[s].serves(in.group)) {
              CHECK(matched[out.slot] >= matched[s], "affinity chose slot " << out.slot << " (matched "
                                                                            << matched[out.slot] << ") over slot " << s
                                                                            << " (matched " << matched[s] << ")");
            }
          }
        }
      }
      const kvroute::OffloadResult& offload = router.lastOffload();
      const bool offloaded = offload.outcome == kvroute::OffloadOutcome::kOffload;
      CHECK(router.policy().offloadCost.chargePrefill || offload.extraPrefillMs == 0,
            "extra prefill " << offload.extraPrefillMs << " without chargePrefill");
      CHECK(router.policy().offload || offload.outcome == kvroute::OffloadOutcome::kOff,
            "offload outcome " << static_cast<int>(offload.outcome) << " without the layer");
      if (offloaded) {
        const uint32_t p = static_cast<uint32_t>(offload.prefillSlot);
        CHECK(p < slots.size() && p != static_cast<uint32_t>(out.slot) && slots[p].live && !slots[p].drained &&
                  slots[p].serves(in.group),
              "offload to prefill slot " << offload.prefillSlot << ", not another candidate");
        CHECK(offload.interferenceMs > offload.transferMs + std::max(0.0, offload.extraPrefillMs),
              "offload with interference " << offload.interferenceMs << " <= transfer " << offload.transferMs
                                           << " + extra " << offload.extraPrefillMs);
        CHECK((offload.prefillTicket >= 0) == !in.dryRun, "prefill ticket " << offload.prefillTicket);
      } else {
        CHECK(offload.prefillSlot == -1 && offload.prefillTicket == -1, "prefill slot/ticket without an offload");
      }
      if (in.dryRun) {
        CHECK(out.ticket == -1, "dry run returned ticket " << out.ticket);
        continue;
      }
      CHECK(out.ticket >= 0, "ticket " << out.ticket);
      // The decode target, and with an offload the prefill instance too.
      std::vector<std::pair<uint32_t, double>> dispatched = {{static_cast<uint32_t>(out.slot), out.ticket}};
      if (offloaded) {
        dispatched.emplace_back(static_cast<uint32_t>(offload.prefillSlot), offload.prefillTicket);
        CHECK(router.warmPairs().warm(static_cast<uint32_t>(offload.prefillSlot), static_cast<uint32_t>(out.slot)),
              "an offload left its pair cold");
        ++totals.offloads;
      }
      for (const auto& [slot, ticket] : dispatched) {
        SlotModel& m = slots[slot];
        if (exact) totals.evicted += m.ref->commit(in.ids, n, m.ref->match(in.ids, n));
        m.routed += 1;
        tickets.push_back(TicketModel{ticket, slot, m.incarnation, true});
        ++openTickets;
        checkSlot(slot);
      }
      ++committed;  // one decision, counted once by its reason
      ++totals.commits;
    } else if (r < 790) {
      if (tickets.empty()) continue;
      // A ticket event; closed tickets are refused.
      const size_t k = tickets.size() - 1 - rng.below(std::min<size_t>(tickets.size(), 64));
      TicketModel& t = tickets[k];
      const auto event = static_cast<kvroute::TicketEvent>(rng.below(3));
      note("onTicket event=" + std::to_string(static_cast<int>(event)) + " ticket=" + std::to_string(t.ticket) +
           (t.open ? " (open)" : " (closed)"));
      const bool ok = router.onTicket(t.ticket, event);
      CHECK(ok == t.open, "onTicket returned " << ok << " for a ticket that is " << (t.open ? "open" : "closed"));
      if (t.open && event != kvroute::TicketEvent::kFirstToken) {
        t.open = false;
        --openTickets;
        SlotModel& m = slots[t.slot];
        if (m.live && m.incarnation == t.incarnation) {
          (event == kvroute::TicketEvent::kComplete ? m.completed : m.aborted) += 1;
        }
      }
      if (tickets.size() > 4096) {
        tickets.erase(std::remove_if(tickets.begin(), tickets.end(), [](const TicketModel& x) { return !x.open; }),
                      tickets.end());
      }
    } else if (r < 810) {
      kind = (kind + 1) % kvroute::kPolicyKindCount;
      note("setPolicy kind=" + std::to_string(kind));
      router.setPolicy(randomPolicy(rng, kind));
    } else if (r < 830) {
      if (slots.size() >= 64 && live.size() == slots.size()) continue;
      const uint32_t s = addInstance();
      if (rng.percent(70)) setGroups(s);
    } else if (r < 845) {
      // Drained instances are removed first, as an operator would.
      const uint32_t s = !drained.empty() && rng.percent(60) ? rng.pick(drained) : rng.pick(live);
      note(describe("removeInstance", s, 0));
      router.removeInstance(s);
      slots[s].live = false;
      slots[s].ref.reset();
    } else if (r < 860) {
      if (routable.size() < 2 && rng.percent(90)) continue;
      const uint32_t s = rng.pick(live);
      note(describe("drainInstance", s, 0));
      router.drainInstance(s);
      slots[s].drained = true;
    } else if (r < 900) {
      const uint32_t s = rng.pick(live);
      std::vector<uint64_t> list;
      const std::vector<uint64_t> held = slots[s].ref->heldIds();
      const uint32_t count = static_cast<uint32_t>(rng.range(0, 5));
      for (uint32_t k = 0; k < count; ++k) {
        const uint64_t pickKind = rng.below(10);
        if (!exact && pickKind < 4) {
          list.push_back(garbage.anyId());
        } else if (pickKind < 6 && !held.empty()) {
          list.push_back(rng.pick(held));
        } else {
          list.push_back(pickKind < 9 ? wl.recentId() : wl.fresh());
        }
      }
      note(describe("removeBlocks", s, count), list.data(), count);
      const uint64_t removed = router.removeBlocks(s, list.data(), count);
      if (exact) {
        const uint64_t want = slots[s].ref->remove(list.data(), count);
        CHECK(removed == want, "slot " << s << ": removeBlocks = " << removed << ", model " << want);
      }
      totals.removed += removed;
    } else if (r < 925) {
      const uint32_t s = rng.pick(live);
      const uint64_t capacity = pickCapacity(rng);
      note(describe("setCapacity", s, 0, static_cast<int64_t>(capacity)));
      const uint64_t evicted = router.setCapacity(s, capacity);
      const uint64_t want = slots[s].ref->setCapacity(capacity);
      if (exact) CHECK(evicted == want, "slot " << s << ": setCapacity evicted " << evicted << ", model " << want);
    } else if (r < 930) {
      const uint32_t s = rng.pick(live);
      note(describe("clearBlocks", s, 0));
      router.clearBlocks(s);
      slots[s].ref->clear();
    } else if (r < 960) {
      const uint32_t s = rng.pick(live);
      kvroute::ObservedState o;
      o.present = rng.percent(85);
      o.timestampMs = nowMs - static_cast<double>(rng.below(1500));
      auto maybe = [&](double v) { return rng.percent(20) ? NAN : v; };
      o.running = maybe(static_cast<double>(rng.below(8)));
      o.waiting = maybe(static_cast<double>(rng.below(8)));
      o.kvBlocksTotal = maybe(static_cast<double>(rng.below(3) * 500));
      o.kvBlocksUsed = maybe(static_cast<double>(rng.below(500)));
      o.pendingPrefillTokens = maybe(static_cast<double>(rng.below(20000)));
      o.maxPrefillRemaining = maybe(static_cast<double>(rng.below(4000)));
      o.decodeBatch = maybe(static_cast<double>(rng.below(8)));
      note(describe("setObserved", s, 0, o.present));
      router.setObserved(s, o);
    } else if (r < 980) {
      nowMs += static_cast<double>(rng.below(600));
      router.setTime(nowMs);
    } else if (r < 990) {
      setGroups(rng.pick(live));
    } else {
      const uint32_t s = rng.pick(live);
      note(describe("full check", s, 0));
      if (exact) fullCheck(s);
    }
    // Checks after every operation (cheap) and every few (whole router).
    for (uint32_t s : live) {
      if (s < slots.size() && (g.step + s) % 8 == 0) checkSlot(s);
    }
    if (g.step % (largeFleet ? 8 : 2) == 0) routerInvariants();
    if (exact && g.step % 40 == 0) {
      const std::vector<uint32_t> now = liveSlots();
      if (!now.empty()) fullCheck(rng.pick(now));
    }
  }
  ++g.step;
  note("final check");
  routerInvariants();
  uint64_t reasons = 0;
  for (uint64_t c : router.reasonCounts()) reasons += c;
  CHECK(reasons == committed, "reason counts sum to " << reasons << ", routes committed " << committed);
  for (uint32_t s = 0; s < slots.size(); ++s) {
    checkSlot(s);
    if (exact && slots[s].live) fullCheck(s);
  }
  totals.ops += ops;
}

// ---------------------------------------------------------------------------
// Phase: BlockIndex with ids that are not chained. Only safety is asserted.

void garbageIndexPhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0xA24BAED4963EE407ULL + 5);
  GarbageWorkload wl(rng, 0x6A000 + seed);
  FleetIndex fleet;
  std::vector<std::unique_ptr<BlockIndex>> indexes;
  const int32_t bits[] = {0, 2, 55, -1};
  uint64_t tracked = 0;
  const BlockIndex* bySlot[FleetIndex::kMaxInstances] = {};
  std::vector<const BlockIndex*> all;
  for (int32_t bit : bits) {
    indexes.push_back(std::make_unique<BlockIndex>(pickCapacity(rng)));
    if (bit >= 0) {
      indexes.back()->attachFleet(&fleet, static_cast<uint32_t>(bit));
      tracked |= uint64_t{1} << bit;
      bySlot[bit] = indexes.back().get();
    }
    all.push_back(indexes.back().get());
  }
  std::vector<int32_t> manyOut(indexes.size());
  int32_t fleetOut[FleetIndex::kMaxInstances];

  for (g.step = 1; g.step <= ops; ++g.step) {
    const uint64_t r = rng.below(100);
    const size_t who = rng.below(indexes.size());
    BlockIndex& index = *indexes[who];
    if (r < 80) {
      const Request req = wl.next();
      const uint32_t n = static_cast<uint32_t>(req.ids.size());
      const uint64_t* ids = req.ids.data();
      note(describe("commit", who, n), ids, n);
      kvroute::matchMany(all.data(), all.size(), ids, n, manyOut.data());
      std::fill(fleetOut, fleetOut + FleetIndex::kMaxInstances, -7);
      kvroute::matchFleet(fleet, tracked, bySlot, ids, n, fleetOut);
      for (size_t k = 0; k < indexes.size(); ++k) {
        const uint32_t m = indexes[k]->match(ids, n);
        CHECK(m <= n, "instance " << k << ": match " << m << " > n " << n);
        CHECK(manyOut[k] >= 0 && manyOut[k] <= static_cast<int32_t>(n),
              "instance " << k << ": matchMany " << manyOut[k]);
      }
      for (uint32_t b = 0; b < FleetIndex::kMaxInstances; ++b) {
        if (bySlot[b] == nullptr) {
          CHECK(fleetOut[b] == -7, "untracked bit " << b << " written: " << fleetOut[b]);
        } else {
          CHECK(fleetOut[b] >= 0 && fleetOut[b] <= static_cast<int32_t>(n),
                "bit " << b << ": matchFleet " << fleetOut[b]);
        }
      }
      index.commit(ids, n, index.match(ids, n));
      CHECK(index.blocks() <= index.capacity(), "blocks " << index.blocks() << " over capacity " << index.capacity());
      ++totals.commits;
    } else if (r < 90) {
      std::vector<uint64_t> list;
      const uint32_t count = static_cast<uint32_t>(rng.range(0, 6));
      for (uint32_t k = 0; k < count; ++k) list.push_back(wl.anyId());
      note(describe("remove", who, count), list.data(), count);
      totals.removed += index.remove(list.data(), count);
    } else if (r < 97) {
      const uint64_t capacity = pickCapacity(rng);
      note(describe("setCapacity", who, 0, static_cast<int64_t>(capacity)));
      index.setCapacity(capacity);
      CHECK(index.blocks() <= capacity, "blocks over capacity after setCapacity");
    } else {
      note(describe("clear", who, 0));
      index.clear();
    }
    checkIndexInvariants(index, "garbage");
    if (g.step % 8 == 0) {
      size_t reported = 0;
      for (size_t k = 0; k < indexes.size(); ++k) {
        if (bits[k] >= 0) reported += indexes[k]->stridedBlocks();
      }
      CHECK(fleet.bits() == reported, "fleet holds " << fleet.bits() << " bits, instances report " << reported);
    }
  }
  totals.ops += ops;
}

// ---------------------------------------------------------------------------
// Request scanner.

void scanDirectedCases() {
  struct Case {
    double x;
    const char* js;
  };
  const Case cases[] = {
      {0.0, "0"},
      {-0.0, "0"},
      {1e21, "1e+21"},
      {-1e21, "-1e+21"},
      {1e20, "100000000000000000000"},
      {123456789012345680000.0, "123456789012345680000"},
      {1e-7, "1e-7"},
      {2.5e-7, "2.5e-7"},
      {1e-6, "0.000001"},
      {1.5e-6, "0.0000015"},
      {123e-20, "1.23e-18"},
      {0.1, "0.1"},
      {-1.5, "-1.5"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {9007199254740993.0, "9007199254740992"},
      {4.35, "4.35"},
      {0.000001234, "0.000001234"},
      {100, "100"},
      {1.5e300, "1.5e+300"},
  };
  for (const Case& c : cases) {
    char buf[kvroute::kJsNumberMaxChars];
    const std::string got(buf, kvroute::formatJsNumber(c.x, buf));
    ++g.step;
    CHECK(got == c.js, "formatJsNumber(" << c.js << ") = " << got);
  }
  CHECK(kvroute::describeJsString("abc") == "\"abc\"", "describe abc");
  // 39 x then an astral character: the cut falls inside its surrogate pair.
  CHECK(kvroute::describeJsString(std::string(39, 'x') + "\xF0\x9F\x98\x80tail") ==
            "\"" + std::string(39, 'x') + "\\ud83d\xE2\x80\xA6\"",
        "describe of a cut surrogate pair");
  Rng rng(99);
  for (int round = 0; round < 200; ++round) {
    ++g.step;
    std::string text(rng.below(3000), '\0');
    for (char& c : text) c = static_cast<char>(rng.below(256));
    const size_t chunk = 1 + rng.below(300);
    std::vector<uint64_t> whole(kvroute::promptBlockCount(text.size(), chunk));
    kvroute::hashPromptBlocks(reinterpret_cast<const uint8_t*>(text.data()), text.size(), chunk, whole.data());
    std::vector<uint64_t> pieces;
    kvroute::PromptHasher hasher(chunk, pieces);
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min<size_t>(text.size() - at, rng.below(2 * chunk + 2));
      hasher.append(text.data() + at, n);
      at += n;
    }
    hasher.finish();
    CHECK(pieces == whole,
          "PromptHasher differs from hashPromptBlocks: chunk " << chunk << ", " << text.size() << " bytes");
  }
}

std::string scanBody(Rng& rng) {
  static const std::vector<std::string> values = {"\"x\\u00e9\\n\xF0\x9F\x98\x80\"",
                                                  "1e21",
                                                  "-0",
                                                  "0.1",
                                                  "5e-324",
                                                  "[1,{\"2\":1,\"1\":2,\"1\":3}]",
                                                  "null",
                                                  "{\"type\":\"text\",\"text\":\"t\"}",
                                                  "true",
                                                  "\"\\ud83d\\ude00\"",
                                                  "[]",
                                                  "{}",
                                                  "123456789012345678"};
  auto some = [&]() {
    std::string out;
    const uint64_t n = rng.below(5);
    for (uint64_t k = 0; k < n; ++k) out += (k ? "," : "") + rng.pick(values);
    return out;
  };
  std::string members = "\"model\":\"m\"";
  if (rng.percent(50)) {
    members += ",\"messages\":[{\"role\":\"user\",\"content\":[" + some() + "],\"tool_calls\":[" + some() +
               "],\"name\":\"n\"}]";
  } else {
    members += ",\"prompt\":[" + some() + "]";
  }
  const uint64_t ids = rng.below(4);
  for (uint64_t k = 0; k < ids; ++k) {
    const std::string member = std::string(rng.percent(50) ? " " : "") + "\"hash_ids\" :[1, 2]";
    members = rng.percent(50) ? member + "," + members : members + " ,\n" + member;
  }
  return "{" + members + "}";
}

void scanPhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0x5CA9ULL + 3);
  kvroute::RequestScanner scanner;
  kvroute::ScanResult r;
  kvroute::ScanResult again;
  for (uint32_t op = 0; op < ops; ++op) {
    ++g.step;
    std::string body = scanBody(rng);
    const bool mutated = rng.percent(60);
    if (mutated && !body.empty()) {
      const size_t at = rng.below(body.size());
      switch (rng.below(3)) {
        case 0:
          body.resize(at);
          break;
        case 1:
          body[at] = static_cast<char>(rng.below(256));
          break;
        default:
          body.insert(at, 1, "\"\\{}[],:-0e.\xFF"[rng.below(14)]);
      }
    }
    kvroute::ScanOptions options;
    options.endpoint = rng.percent(50) ? kvroute::ScanEndpoint::kChat : kvroute::ScanEndpoint::kCompletions;
    options.chunkBytes = 1 + rng.below(200);
    options.stripRanges = rng.percent(70);
    const auto* bytes = reinterpret_cast<const uint8_t*>(body.data());
    scanner.scan(bytes, body.size(), options, r);
    note("scan " + body);
    CHECK(r.outcome == kvroute::ScanOutcome::kOk || r.outcome == kvroute::ScanOutcome::kError ||
              r.outcome == kvroute::ScanOutcome::kFallback,
          "outcome");
    if (r.outcome != kvroute::ScanOutcome::kOk || r.strip.empty()) continue;
    size_t last = 0;
    for (size_t k = 0; k < r.strip.size(); k += 2) {
      CHECK(r.strip[k] >= last && r.strip[k] < r.strip[k + 1] && r.strip[k + 1] <= body.size(), "strip ranges");
      last = r.strip[k + 1];
    }
    std::string stripped(body.size(), '\0');
    stripped.resize(kvroute::copyStripped(bytes, body.size(), r.strip, reinterpret_cast<uint8_t*>(stripped.data())));
    scanner.scan(reinterpret_cast<const uint8_t*>(stripped.data()), stripped.size(), options, again);
    note("stripped " + stripped);
    // The prompt, unchecked beside hash_ids, may now be refused; the JSON may not.
    const bool refused = again.outcome == kvroute::ScanOutcome::kError &&
                         again.code != kvroute::ScanCode::kInvalidJson && again.param != kvroute::ScanParam::kHashIds;
    const bool scanned = again.outcome == kvroute::ScanOutcome::kOk && again.ids == kvroute::ScanIds::kPrompt &&
                         again.strip.empty() && again.model == r.model;
    CHECK(refused || scanned, "the stripped body does not scan as the body without hash_ids");
    ++totals.removed;
  }
  totals.ops += ops;
}

// ---------------------------------------------------------------------------
// PrefixTrie against a map from (parent, id) to node, numbered in insertion order.

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

// ---------------------------------------------------------------------------
// The event-fed index: random packed streams (well formed, or with a word or
// a length disturbed) in arrays of exactly their lengths, so that a read past
// an array trips AddressSanitizer; what validate() accepts is applied, and
// every event-fed slot's match must equal a plain model of the same rules.

struct EventModel {
  std::unordered_map<uint64_t, uint64_t> engine;  // engine hash -> key
  std::unordered_map<uint64_t, uint32_t> refs;    // key -> engine hashes
  bool fed = false;
};

void eventIndexPhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0xE7E7ULL + 3);
  constexpr uint32_t kSlots = 70;  // past the 56 mask slots
  constexpr uint32_t kBlock = 2;
  kvroute::EventIndex index;
  index.ensureSlots(kSlots);
  std::vector<EventModel> model(kSlots);
  // Conversations the engines store and requests ask for: tokens from a tiny
  // vocabulary, so chains meet.
  std::vector<std::vector<uint32_t>> convs(8);
  std::vector<std::vector<uint64_t>> keys(8);
  for (size_t c = 0; c < convs.size(); ++c) {
    convs[c].resize(kBlock * (4 + rng.below(20)));
    for (uint32_t& t : convs[c]) t = static_cast<uint32_t>(rng.below(5));
    keys[c].resize(convs[c].size() / kBlock);
    kvroute::hashTokenBlocks(convs[c].data(), convs[c].size(), kBlock, false, 0, keys[c].data());
  }
  auto hashOf = [](uint32_t slot, uint64_t key) {
    return (key ^ (slot * 0x9E3779B97F4A7C15ULL)) * 0xFF51AFD7ED558CCDULL;
  };
  std::vector<int32_t> matched(kSlots);
  uint64_t refused = 0;
  uint64_t heldMatches = 0;  // event-fed matches of at least one block
  for (uint32_t op = 0; op < ops; ++op) {
    ++g.step;
    const uint32_t slot = static_cast<uint32_t>(rng.below(kSlots));
    if (rng.percent(5)) {
      model[slot].fed = !model[slot].fed;
      index.setFed(slot, model[slot].fed);
      continue;
    }
    if (rng.percent(2)) {
      index.reset(slot);
      model[slot] = EventModel();
      continue;
    }
    if (rng.percent(30)) {
      const size_t c = rng.below(convs.size());
      const uint32_t limit = static_cast<uint32_t>(rng.below(keys[c].size() + 1));
      std::fill(matched.begin(), matched.end(), -7);
      index.match(keys[c].data(), limit, matched.data());
      for (uint32_t s = 0; s < kSlots; ++s) {
        int32_t expected = -7;
        if (model[s].fed) {
          expected = 0;
          while (static_cast<uint32_t>(expected) < limit && model[s].refs.count(keys[c][expected]) != 0) ++expected;
        }
        CHECK(matched[s] == expected, "slot " << s << " matched " << matched[s] << ", model " << expected);
        if (expected > 0) ++heldMatches;
      }
      continue;
    }
    // A stream of 1-4 records.
    std::vector<uint32_t> opsWords;
    std::vector<uint64_t> hashes;
    std::vector<uint32_t> tokens;
    std::vector<std::function<void()>> effects;
    for (uint64_t r = 1 + rng.below(4); r > 0; --r) {
      const uint64_t kind = rng.below(10);
      const size_t c = rng.below(convs.size());
      if (kind < 6) {
        const size_t start = rng.percent(40) ? 0 : rng.below(keys[c].size());
        const size_t count = std::min<size_t>(1 + rng.below(5), keys[c].size() - start);
        const uint32_t flags = (start > 0 ? kvroute::kFlagParent : 0) | (rng.percent(5) ? kvroute::kFlagLora : 0);
        opsWords.insert(opsWords.end(), {kvroute::kOpStored, flags, static_cast<uint32_t>(count), kBlock});
        if (start > 0) hashes.push_back(hashOf(slot, keys[c][start - 1]));
        for (size_t j = 0; j < count; ++j) hashes.push_back(hashOf(slot, keys[c][start + j]));
        tokens.insert(tokens.end(), convs[c].begin() + start * kBlock, convs[c].begin() + (start + count) * kBlock);
        effects.push_back([&, slot, c, start, count, flags] {
          EventModel& m = model[slot];
          if ((flags & kvroute::kFlagLora) != 0) return;
          if (start > 0 && m.engine.count(hashOf(slot, keys[c][start - 1])) == 0) return;
          for (size_t j = 0; j < count; ++j) {
            const uint64_t h = hashOf(slot, keys[c][start + j]);
            if (m.engine.emplace(h, keys[c][start + j]).second) m.refs[keys[c][start + j]] += 1;
          }
        });
      } else if (kind < 9) {
        const size_t count = rng.below(4);
        opsWords.insert(opsWords.end(), {kvroute::kOpRemoved, 0, static_cast<uint32_t>(count), 0});
        std::vector<uint64_t> picked;
        for (size_t j = 0; j < count; ++j) picked.push_back(hashOf(slot, rng.pick(keys[c])));
        hashes.insert(hashes.end(), picked.begin(), picked.end());
        effects.push_back([&, slot, picked] {
          EventModel& m = model[slot];
          for (uint64_t h : picked) {
            auto it = m.engine.find(h);
            if (it == m.engine.end()) continue;
            if (--m.refs[it->second] == 0) m.refs.erase(it->second);
            m.engine.erase(it);
          }
        });
      } else {
        opsWords.insert(opsWords.end(), {kvroute::kOpCleared, 0, 0, 0});
        effects.push_back([&, slot] {
          model[slot].engine.clear();
          model[slot].refs.clear();
        });
      }
    }
    // Now and then disturb a word or cut an array short.
    const uint64_t disturb = rng.below(8);
    if (disturb == 0)
      opsWords[rng.below(opsWords.size())] =
          static_cast<uint32_t>(rng.pick(std::vector<uint64_t>{0, 4, 7, 0xFFFFFFFF, 1u << 25}));
    if (disturb == 1 && !hashes.empty()) hashes.pop_back();
    if (disturb == 2 && !tokens.empty()) tokens.pop_back();
    if (disturb == 3 && !opsWords.empty()) opsWords.pop_back();
    kvroute::PackedKvEvents p;
    // Exact-size heap copies: nothing past the lengths is addressable.
    std::unique_ptr<uint32_t[]> o(new uint32_t[opsWords.size() + (opsWords.empty() ? 1 : 0)]);
    std::unique_ptr<uint64_t[]> h(new uint64_t[hashes.size() + (hashes.empty() ? 1 : 0)]);
    std::unique_ptr<uint32_t[]> t(new uint32_t[tokens.size() + (tokens.empty() ? 1 : 0)]);
    std::copy(opsWords.begin(), opsWords.end(), o.get());
    std::copy(hashes.begin(), hashes.end(), h.get());
    std::copy(tokens.begin(), tokens.end(), t.get());
    p.ops = o.get();
    p.opsLength = opsWords.size();
    p.hashes = h.get();
    p.hashesLength = hashes.size();
    p.tokens = t.get();
    p.tokensLength = tokens.size();
    note("apply slot " + std::to_string(slot) + " disturb " + std::to_string(disturb), h.get(),
         static_cast<uint32_t>(hashes.size()));
    const std::string error = kvroute::EventIndex::validate(p);
    if (!error.empty()) {
      CHECK(disturb <= 3, "an undisturbed stream was refused: " << error);
      ++refused;
      continue;
    }
    if (disturb == 0) continue;  // a disturbed word that still validates: effects unknown to the model
    index.apply(slot, p);
    for (auto& effect : effects) effect();
    ++totals.commits;
    if (op % 256 == 0) {
      const std::string broken = index.checkInvariants();
      CHECK(broken.empty(), broken);
      ++totals.fullChecks;
    }
  }
  const std::string broken = index.checkInvariants();
  CHECK(broken.empty(), broken);
  CHECK(refused > ops / 50, "too few refused streams: " << refused);
  CHECK(heldMatches > ops / 4, "too few matches of held blocks: " << heldMatches);
  totals.ops += ops;
}

// ---------------------------------------------------------------------------

int failures = 0;

template <typename Body>
void runPhase(const std::string& phase, uint64_t seed, Body body) {
  g.phase = phase;
  g.seed = seed;
  g.step = 0;
  g.trail.clear();
  Totals totals;
  const auto start = std::chrono::steady_clock::now();
  try {
    body(totals);
  } catch (const Failure& f) {
    ++failures;
    std::fputs(f.message.c_str(), stdout);
    std::fflush(stdout);
    return;
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "ok   %-22s seed=%-4llu ops=%-6llu commits=%-6llu offloads=%-5llu evicted=%-8llu removed=%-6llu "
      "fullChecks=%-4llu %7.0f ms\n",
      phase.c_str(), static_cast<unsigned long long>(seed), static_cast<unsigned long long>(totals.ops),
      static_cast<unsigned long long>(totals.commits), static_cast<unsigned long long>(totals.offloads),
      static_cast<unsigned long long>(totals.evicted), static_cast<unsigned long long>(totals.removed),
      static_cast<unsigned long long>(totals.fullChecks), ms);
  std::fflush(stdout);
}

}  // namespace

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
  if (failures > 0) {
    std::printf("core-test: %d phase(s) FAILED (%.1f s)\n", failures, seconds);
    return 1;
  }
  std::printf("core-test: all phases passed (%.1f s)\n", seconds);
  return 0;
}
