// shared-core-stress — N threads on one SharedCore, built with
// -fsanitize=thread (scripts/tsan-test.sh): ThreadSanitizer proves that every
// access to the shared router happens under its lock, in the order the
// bindings take it.
//
// Each thread plays one JsRouter (one `kvroute serve --threads N` event
// loop): its own scratch, its own queued ticket events (applied first under
// the lock, as JsRouter::core() does) and its own call number. Routes and
// matches go through runRouteCall (core/route-call.h), the sequence
// js-router-route.cc runs: read the request, then lock, then route. The other
// calls take the lock first, as every other binding does. The mix: route and
// match (with and without a model group), first-token/complete/abort (queued
// and direct), instances added/drained/removed, model groups that keep
// growing (Router::groupCount() moves while other threads route), costs,
// policy switches, KV events, observed state, blocks and capacity, and the
// reports (stats, counts, invariants).
//
// Besides TSan's verdict it asserts: every decision names a candidate that
// serves the request's group; a group the router does not know is refused
// with RequestRangeError; the core's call count equals the calls the threads
// made; the invariants hold at the end.
//
// Usage: shared-core-stress [threads [operations-per-thread [seconds [seed]]]].
// Bounded in count and in time: each thread stops at its count or the deadline.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/route-call.h"
#include "core/shared-core.h"
#include "rng.h"

namespace {

using core_test::Rng;
using kvroute::RequestRangeError;
using kvroute::RouteInput;
using kvroute::RouteOutput;
using kvroute::Router;
using kvroute::SharedCore;
using kvroute::TicketEvent;
using Clock = std::chrono::steady_clock;

constexpr uint32_t kMaxSlots = 24;
constexpr uint32_t kMaxGroupId = 1500;  // groups_ grows one id at a time up to here
constexpr uint32_t kPrefixes = 32;      // shared prompt prefixes, so matches happen

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "shared-core-stress: FAILED: %s\n", message.c_str());
  std::exit(1);
}

struct Shared {
  std::shared_ptr<SharedCore> core;
  // The group ids a request may name: ids below it were declared by a call
  // that returned before this was raised (release), so they are known.
  std::atomic<uint32_t> knownGroups{1};
  std::atomic<uint32_t> nextGroup{1};
  Clock::time_point deadline;
};

struct ThreadTotals {
  uint64_t locked = 0;  // calls that took the lock (SharedCore::exclusive)
  uint64_t routes = 0, matches = 0, refused = 0, tickets = 0, fleet = 0, groups = 0, other = 0;
};

// One thread's JsRouter: scratch, explain buffers, the ticket queue.
class Worker {
 public:
  Worker(Shared& shared, uint64_t seed) : s_(shared), rng_(seed) {}

  ThreadTotals run(uint64_t operations) {
    for (uint64_t op = 0; op < operations && Clock::now() < s_.deadline; ++op) step();
    drainAll();
    return t_;
  }

 private:
  // JsRouter::exclusive() then JsRouter::core(): the lock, then the queue.
  std::unique_lock<std::mutex> lockAndDrain() {
    auto lock = s_.core->exclusive(lastOpSeq_);
    ++t_.locked;
    Router& router = s_.core->router;
    for (const auto& [ticket, event] : queued_) router.onTicket(ticket, event);
    queued_.clear();
    return lock;
  }

  void step() {
    const uint64_t r = rng_.below(100);
    if (r < 45) return route(false);
    if (r < 50) return route(true);
    if (r < 66) return ticketEvent();
    if (r < 71) return setGroups();
    if (r < 76) return changeFleet();
    if (r < 80) return setCosts();
    if (r < 82) return setPolicy();
    if (r < 87) return kvEvents();
    if (r < 91) return setObserved();
    if (r < 94) return blocks();
    return report();
  }

  // A request: a shared prefix and a private tail of block ids.
  void makeIds() {
    const uint64_t prefix = rng_.below(kPrefixes);
    const uint32_t shared = static_cast<uint32_t>(rng_.range(0, 24));
    const uint32_t tail = static_cast<uint32_t>(rng_.range(0, 8));
    ids_.clear();
    for (uint32_t k = 0; k < shared; ++k) ids_.push_back((prefix << 32) | k);
    for (uint32_t k = 0; k < tail; ++k) ids_.push_back(rng_.next() | 1);
  }

  // route()/match() as js-router-route.cc runs them: runRouteCall.
  void route(bool matchOnly) {
    const uint32_t known = s_.knownGroups.load(std::memory_order_acquire);
    const bool unknown = rng_.percent(3);
    const double group = unknown            ? static_cast<double>(kMaxGroupId + 1 + rng_.below(10))
                         : rng_.percent(40) ? -1
                                            : static_cast<double>(rng_.below(known));
    const bool session = rng_.percent(60);
    const uint64_t sessionKey = rng_.below(256);
    const bool dryRun = rng_.percent(10);
    // Whether the call took the lock is told by its number, not assumed: a
    // refused group is refused under the lock, or before it.
    const uint64_t before = lastOpSeq_;
    struct Counted {
      const uint64_t& seq;
      uint64_t before;
      uint64_t& locked;
      ~Counted() { locked += seq != before ? 1 : 0; }
    } counted{lastOpSeq_, before, t_.locked};
    try {
      const RouteOutput out = kvroute::runRouteCall(
          *s_.core, lastOpSeq_, group,
          [&](RouteInput& in) {  // thread-private: this worker's scratch only
            makeIds();
            in.ids = ids_.data();
            in.n = static_cast<uint32_t>(ids_.size());
            in.blockTokens = 16;
            in.inputTokens = static_cast<double>(ids_.size()) * 16;
            in.hasSession = session;
            in.sessionKey = sessionKey;
            in.dryRun = dryRun;
            in.tokenKeys = rng_.percent(30);
          },
          [&](Router& router, const RouteInput& in) {
            for (const auto& [ticket, event] : queued_) router.onTicket(ticket, event);
            queued_.clear();
            const size_t slots = router.slotCount();
            matched_.assign(slots, 0);
            scores_.assign(slots, 0);
            terms_.assign(slots * kvroute::kTermCount, 0);
            if (matchOnly) {
              router.matchRequest(in, matched_.data());
              return RouteOutput{};
            }
            const RouteOutput decided = router.route(in, matched_.data(), scores_.data(), terms_.data());
            checkDecision(router, in, decided);
            return decided;
          });
      if (matchOnly) {
        ++t_.matches;
      } else {
        ++t_.routes;
        if (out.ticket >= 0) open_.push_back(out.ticket);
      }
    } catch (const RequestRangeError&) {
      if (!unknown) fail("a known group was refused: " + std::to_string(group));
      ++t_.refused;
      return;
    }
    if (unknown) fail("an unknown group was accepted: " + std::to_string(group));
  }

  // Under the lock: the decision names a live candidate serving the group.
  static void checkDecision(const Router& router, const RouteInput& in, const RouteOutput& out) {
    if (out.slot < 0) return;
    const uint32_t slot = static_cast<uint32_t>(out.slot);
    if (!router.isLive(slot) || router.isDrained(slot)) fail("routed to a slot that is not routable");
    if (in.group < 0 || router.isWildcard(slot)) return;
    const auto& groups = router.instanceGroups(slot);
    if (!std::binary_search(groups.begin(), groups.end(), static_cast<uint32_t>(in.group)))
      fail("routed to slot " + std::to_string(slot) + ", which does not serve group " + std::to_string(in.group));
  }

  void ticketEvent() {
    ++t_.tickets;
    if (open_.empty()) return;
    const size_t k = rng_.below(open_.size());
    const double ticket = open_[k];
    const uint64_t r = rng_.below(10);
    const TicketEvent event = r < 2 ? TicketEvent::kFirstToken : r < 8 ? TicketEvent::kComplete : TicketEvent::kAbort;
    if (event != TicketEvent::kFirstToken) {
      open_[k] = open_.back();
      open_.pop_back();
    }
    if (rng_.percent(70)) {
      queued_.emplace_back(ticket, event);  // the JS queue, applied at the next locked call
      return;
    }
    const auto lock = lockAndDrain();
    s_.core->router.onTicket(ticket, event);
  }

  // A live slot, under the lock; -1 when there is none.
  int64_t liveSlot(const Router& router) {
    const uint32_t n = static_cast<uint32_t>(router.slotCount());
    if (n == 0) return -1;
    const uint32_t start = static_cast<uint32_t>(rng_.below(n));
    for (uint32_t k = 0; k < n; ++k) {
      if (router.isLive((start + k) % n)) return (start + k) % n;
    }
    return -1;
  }

  // Declares groups on a slot; half the time a new id, so groupCount() grows
  // (and groups_ is resized) while other threads route.
  void setGroups() {
    ++t_.groups;
    uint32_t fresh = 0;
    if (rng_.percent(60)) {
      fresh = s_.nextGroup.fetch_add(1, std::memory_order_relaxed);
      if (fresh > kMaxGroupId) fresh = 0;
    }
    std::vector<uint32_t> groups;
    if (fresh != 0) groups.push_back(fresh);
    groups.push_back(static_cast<uint32_t>(rng_.below(8)));
    std::sort(groups.begin(), groups.end());
    groups.erase(std::unique(groups.begin(), groups.end()), groups.end());
    {
      const auto lock = lockAndDrain();
      Router& router = s_.core->router;
      const int64_t slot = liveSlot(router);
      if (slot < 0) return;
      const bool wildcard = rng_.percent(15);
      router.setInstanceGroups(static_cast<uint32_t>(slot), wildcard, groups.data(),
                               static_cast<uint32_t>(wildcard ? 0 : groups.size()));
      // What this call made known (groupCount never shrinks).
      uint32_t known = s_.knownGroups.load(std::memory_order_relaxed);
      const uint32_t now = router.groupCount();
      while (known < now && !s_.knownGroups.compare_exchange_weak(known, now, std::memory_order_release)) {
      }
    }
  }

  void changeFleet() {
    ++t_.fleet;
    const auto lock = lockAndDrain();
    Router& router = s_.core->router;
    const int64_t slot = liveSlot(router);
    const uint64_t r = rng_.below(10);
    if (slot < 0 || (r < 4 && router.slotCount() < kMaxSlots)) {
      router.addInstance("i" + std::to_string(rng_.below(1000)), 64 + rng_.below(4096));
    } else if (r < 7) {
      router.drainInstance(static_cast<uint32_t>(slot), rng_.percent(60));
    } else {
      router.removeInstance(static_cast<uint32_t>(slot));
    }
  }

  void setCosts() {
    ++t_.other;
    const auto lock = lockAndDrain();
    Router& router = s_.core->router;
    const int64_t slot = liveSlot(router);
    if (slot < 0) return;
    if (rng_.percent(50)) {
      router.setReturningTokens(static_cast<uint32_t>(slot), static_cast<double>(rng_.below(20000)));
      return;
    }
    kvroute::InstanceCosts costs;
    costs.secondsPerToken = 1e-5 * static_cast<double>(1 + rng_.below(100));
    costs.overheadSeconds = 0.001 * static_cast<double>(rng_.below(50));
    costs.interference = rng_.percent(50) ? NAN : 0.1 * static_cast<double>(rng_.below(10));
    router.setInstanceCosts(static_cast<uint32_t>(slot), rng_.percent(20) ? nullptr : &costs);
  }

  void setPolicy() {
    ++t_.other;
    kvroute::PolicyConfig p;
    p.kind = static_cast<kvroute::PolicyKind>(rng_.below(kvroute::kPolicyKindCount));
    p.ringFirstTurn = rng_.percent(30);
    const auto lock = lockAndDrain();
    s_.core->router.setPolicy(p);
  }

  // A BlockStored of the request's keys (chained from a prefix), or a clear.
  void kvEvents() {
    ++t_.other;
    makeIds();
    const uint32_t count = std::max<uint32_t>(1, std::min<uint32_t>(static_cast<uint32_t>(ids_.size()), 8));
    std::vector<uint32_t> ops = {kvroute::kOpStored, 0, count, 1};
    std::vector<uint64_t> hashes(ids_.begin(), ids_.begin() + std::min<size_t>(count, ids_.size()));
    while (hashes.size() < count) hashes.push_back(rng_.next());
    std::vector<uint32_t> tokens(count);
    for (uint32_t k = 0; k < count; ++k) tokens[k] = static_cast<uint32_t>(rng_.below(50000));
    kvroute::PackedKvEvents packed;
    packed.ops = ops.data();
    packed.opsLength = ops.size();
    packed.hashes = hashes.data();
    packed.hashesLength = hashes.size();
    packed.tokens = tokens.data();
    packed.tokensLength = tokens.size();
    const std::string error = kvroute::EventIndex::validate(packed);  // thread-private, as in the binding
    if (!error.empty()) fail("a generated event stream was refused: " + error);
    const auto lock = lockAndDrain();
    Router& router = s_.core->router;
    const int64_t slot = liveSlot(router);
    if (slot < 0) return;
    const uint32_t s = static_cast<uint32_t>(slot);
    const uint64_t r = rng_.below(10);
    if (r < 2) {
      router.setEventFed(s, !router.eventFed(s));
    } else if (r < 3) {
      router.clearKvEvents(s);
    } else {
      router.applyKvEvents(s, packed);
    }
  }

  void setObserved() {
    ++t_.other;
    kvroute::ObservedState o;
    o.present = rng_.percent(80);
    o.timestampMs = rng_.percent(50) ? 0 : 1e12 + static_cast<double>(rng_.below(1000));
    o.running = static_cast<double>(rng_.below(64));
    o.waiting = static_cast<double>(rng_.below(64));
    o.kvBlocksUsed = static_cast<double>(rng_.below(1000));
    o.kvBlocksTotal = 1000;
    o.pendingPrefillTokens = static_cast<double>(rng_.below(100000));
    o.maxPrefillRemaining = static_cast<double>(rng_.below(10000));
    o.decodeBatch = static_cast<double>(rng_.below(64));
    const auto lock = lockAndDrain();
    Router& router = s_.core->router;
    const int64_t slot = liveSlot(router);
    if (slot >= 0) router.setObserved(static_cast<uint32_t>(slot), o);
  }

  void blocks() {
    ++t_.other;
    makeIds();
    const auto lock = lockAndDrain();
    Router& router = s_.core->router;
    const int64_t slot = liveSlot(router);
    if (slot < 0) return;
    const uint32_t s = static_cast<uint32_t>(slot);
    const uint64_t r = rng_.below(10);
    if (r < 5) {
      router.removeBlocks(s, ids_.data(), static_cast<uint32_t>(ids_.size()));
    } else if (r < 7) {
      router.clearBlocks(s);
    } else {
      router.setCapacity(s, 16 + rng_.below(4096));
    }
  }

  void report() {
    ++t_.other;
    const auto lock = lockAndDrain();
    const Router& router = s_.core->router;
    const int64_t slot = liveSlot(router);
    if (slot >= 0) (void)router.stats(static_cast<uint32_t>(slot));
    (void)router.reasonCounts();
    (void)router.openTickets();
    (void)router.sessionCount();
    (void)router.fleetBytes();
    if (rng_.percent(5)) {
      const std::string error = router.checkInvariants();
      if (!error.empty()) fail("invariants: " + error);
    }
  }

  // Completes what this worker left open, then applies its queue.
  void drainAll() {
    for (const double ticket : open_) queued_.emplace_back(ticket, TicketEvent::kComplete);
    open_.clear();
    const auto lock = lockAndDrain();
  }

  Shared& s_;
  Rng rng_;
  ThreadTotals t_;
  uint64_t lastOpSeq_ = 0;
  std::vector<uint64_t> ids_;
  std::vector<int32_t> matched_;
  std::vector<double> scores_;
  std::vector<double> terms_;
  std::vector<double> open_;
  std::vector<std::pair<double, TicketEvent>> queued_;
};

double argOr(int argc, char** argv, int k, double fallback) {
  return argc > k ? std::strtod(argv[k], nullptr) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const uint32_t threads = static_cast<uint32_t>(argOr(argc, argv, 1, 4));
  const uint64_t operations = static_cast<uint64_t>(argOr(argc, argv, 2, 20000));
  const double seconds = argOr(argc, argv, 3, 60);
  const uint64_t seed = static_cast<uint64_t>(argOr(argc, argv, 4, 1));
  if (threads < 2 || operations < 1 || !(seconds > 0)) fail("usage: shared-core-stress [threads>=2 [ops [s [seed]]]]");

  kvroute::RouterConfig config;
  config.maxSessions = 512;
  Shared shared;
  shared.core = std::make_shared<SharedCore>(config, 128);
  kvroute::shareCore(shared.core);  // turns the lock on, as shareCore() from JavaScript does
  {
    uint64_t seq = 0;
    const auto lock = shared.core->exclusive(seq);
    for (uint32_t k = 0; k < 8; ++k) shared.core->router.addInstance("seed" + std::to_string(k), 1024);
  }
  shared.deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));

  const auto start = Clock::now();
  std::vector<ThreadTotals> totals(threads);
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      Worker worker(shared, seed * 1000003 + t);
      totals[t] = worker.run(operations);
    });
  }
  for (std::thread& thread : pool) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();

  ThreadTotals sum;
  for (const ThreadTotals& t : totals) {
    sum.locked += t.locked;
    sum.routes += t.routes;
    sum.matches += t.matches;
    sum.refused += t.refused;
    sum.tickets += t.tickets;
    sum.fleet += t.fleet;
    sum.groups += t.groups;
    sum.other += t.other;
  }
  const Router& router = shared.core->router;
  // One call numbered the seeding; every other locked call was a thread's.
  if (shared.core->ops != sum.locked + 1)
    fail("the core numbered " + std::to_string(shared.core->ops) + " calls, the threads made " +
         std::to_string(sum.locked + 1));
  const std::string error = router.checkInvariants();
  if (!error.empty()) fail("invariants at the end: " + error);
  const uint64_t ops = sum.routes + sum.matches + sum.refused + sum.tickets + sum.fleet + sum.groups + sum.other;
  std::printf(
      "shared-core-stress: %u threads, %llu operations (%llu routes, %llu matches, %llu refused groups, "
      "%llu ticket events, %llu fleet changes, %llu group changes, %llu other) in %.1f s; %llu locked calls, "
      "%llu contended; %u groups, %zu slots, %zu open tickets\n",
      threads, static_cast<unsigned long long>(ops), static_cast<unsigned long long>(sum.routes),
      static_cast<unsigned long long>(sum.matches), static_cast<unsigned long long>(sum.refused),
      static_cast<unsigned long long>(sum.tickets), static_cast<unsigned long long>(sum.fleet),
      static_cast<unsigned long long>(sum.groups), static_cast<unsigned long long>(sum.other), elapsed,
      static_cast<unsigned long long>(shared.core->ops), static_cast<unsigned long long>(shared.core->contended),
      router.groupCount(), router.slotCount(), router.openTickets());
  return 0;
}
