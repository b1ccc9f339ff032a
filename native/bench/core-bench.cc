// core-bench — the routing core without Node: replays a Mooncake JSONL trace
// through kvroute::Router and prints ns per route()+complete() pair, so the
// cost of the C++ core can be told apart from the Node-API crossing.
//
//   cmake -S . -B build-bench -DKVROUTE_CORE_BENCH=ON && cmake --build build-bench
//   build-bench/core-bench data/mooncake_synthetic_trace.jsonl [policyKind [instances]]
//   build-bench/core-bench agentic [policyKind [instances]]       (generated, like bench/lib/agentic.mjs)
//   AGENTIC_FILE=1 build-bench/core-bench FILE.jsonl ...          (a dumped agentic workload)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/router.h"

namespace {

struct Request {
  std::vector<uint64_t> ids;
  double inputTokens = 0;
};

// Reads "input_length" and "hash_ids" from each JSON line (the trace's own,
// regular layout; not a general JSON parser).
std::vector<Request> readTrace(const char* path) {
  std::ifstream in(path);
  std::vector<Request> out;
  std::string line;
  while (std::getline(in, line)) {
    Request r;
    const size_t len = line.find("\"input_length\":");
    const size_t ids = line.find("\"hash_ids\":");
    if (len == std::string::npos || ids == std::string::npos) continue;
    r.inputTokens = std::strtod(line.c_str() + len + 15, nullptr);
    const char* p = line.c_str() + line.find('[', ids) + 1;
    while (*p && *p != ']') {
      char* end = nullptr;
      const unsigned long long v = std::strtoull(p, &end, 10);
      if (end == p) {
        ++p;
        continue;
      }
      r.ids.push_back(v);
      p = end;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

// The agentic shape of bench/lib/agentic.mjs: 128 shared blocks, first turns
// of 2,000-2,600 blocks, appends of 20-120 blocks, 8-30 turns, 48 sessions.
struct Agentic {
  std::vector<Request> warmup, measured;
};

Agentic agenticTrace(size_t historic, size_t requests) {
  uint64_t x = 0x9E3779B97F4A7C15ULL;
  auto next = [&x] {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * 0x2545F4914F6CDD1DULL;
  };
  auto uniform = [&next](int lo, int hi) { return lo + static_cast<int>(next() % static_cast<uint64_t>(hi - lo + 1)); };
  std::vector<uint64_t> system(128);
  for (auto& id : system) id = next();
  auto open = [&] {
    Request r;
    r.ids = system;
    const int n = uniform(2000, 2600) - 128;
    for (int k = 0; k < n; ++k) r.ids.push_back(next());
    return r;
  };
  Agentic a;
  for (size_t k = 0; k < historic; ++k) a.warmup.push_back(open());
  struct Live {
    Request r;
    int turnsLeft;
    bool fresh;
  };
  std::vector<Live> live;
  for (int k = 0; k < 48; ++k) live.push_back({open(), uniform(8, 30), true});
  while (a.measured.size() < requests) {
    Live& s = live[static_cast<size_t>(uniform(0, 47))];
    if (!s.fresh) {
      s.r.ids.pop_back();
      const int n = uniform(20, 120) + 1;
      for (int k = 0; k < n; ++k) s.r.ids.push_back(next());
    }
    s.fresh = false;
    s.r.inputTokens = static_cast<double>(s.r.ids.size() * 16);
    a.measured.push_back(s.r);
    if (--s.turnsLeft <= 0) s = {open(), uniform(8, 30), true};
  }
  return a;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: core-bench TRACE.jsonl|agentic [policyKind 0-6] [instances]\n");
    return 2;
  }
  const bool agentic = std::string(argv[1]) == "agentic";
  std::vector<Request> trace;
  size_t warm = 1000;
  if (agentic) {
    Agentic a = agenticTrace(560, std::getenv("REQS") ? std::atoi(std::getenv("REQS")) : 3000);
    warm = a.warmup.size();
    trace = a.warmup;
    trace.insert(trace.end(), a.measured.begin(), a.measured.end());
  } else {
    trace = readTrace(argv[1]);
  }
  // A trace written from bench/lib/agentic.mjs (560 warm-up sessions first).
  const bool agenticFile = std::getenv("AGENTIC_FILE") != nullptr;
  if (agenticFile) warm = 560;
  kvroute::RouterConfig config;
  config.policy.kind = static_cast<kvroute::PolicyKind>(argc > 2 ? std::atoi(argv[2]) : 5);
  const int instances = argc > 3 ? std::atoi(argv[3]) : 8;
  const bool longContext = agentic || agenticFile;
  const uint64_t capacity = longContext ? 1200000 / instances : 631;
  config.blockTokens = longContext ? 16 : 512;
  const int kPasses = longContext ? 3 : 50;
  auto makeRouter = [&] {
    auto router = std::make_unique<kvroute::Router>(config);
    for (int k = 0; k < instances; ++k) router->addInstance("engine-" + std::to_string(k), capacity);
    return router;
  };
  auto inputOf = [&](const Request& r) {
    kvroute::RouteInput in;
    in.ids = r.ids.data();
    in.n = static_cast<uint32_t>(r.ids.size());
    in.inputTokens = r.inputTokens;
    in.blockTokens = config.blockTokens;
    return in;
  };
  std::vector<int32_t> matched(instances);
  std::vector<double> scores(instances);

  // route() + complete() of the oldest open request, with the fleet kept busy
  // as in bench/lib/measure.mjs.
  std::vector<double> samples;
  for (int pass = 0; pass < kPasses; ++pass) {
    auto router = makeRouter();
    std::deque<double> open;
    for (size_t k = 0; k < trace.size(); ++k) {
      const kvroute::RouteInput in = inputOf(trace[k]);
      const auto t0 = std::chrono::steady_clock::now();
      const kvroute::RouteOutput out = router->route(in, matched.data(), scores.data());
      if (open.size() >= static_cast<size_t>(instances) * (longContext ? 4 : 8)) {
        router->onTicket(open.front(), kvroute::TicketEvent::kComplete);
        open.pop_front();
      }
      const auto t1 = std::chrono::steady_clock::now();
      open.push_back(out.ticket);
      if (open.size() > 32) router->onTicket(open[open.size() - 32], kvroute::TicketEvent::kFirstToken);
      if (k >= warm) samples.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
  }
  // Matching alone, on the state after replaying the whole trace.
  {
    auto router = makeRouter();
    for (const Request& r : trace) {
      const auto out = router->route(inputOf(r), matched.data(), scores.data());
      router->onTicket(out.ticket, kvroute::TicketEvent::kComplete);
    }
    std::vector<double> m;
    for (size_t k = warm; k < trace.size(); ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      router->match(trace[k].ids.data(), static_cast<uint32_t>(trace[k].ids.size()), matched.data());
      const auto t1 = std::chrono::steady_clock::now();
      m.push_back(std::chrono::duration<double, std::nano>(t1 - t0).count());
    }
    std::sort(m.begin(), m.end());
    std::printf("match alone: p50 %.0f ns  p99 %.0f ns\n", m[m.size() / 2], m[m.size() * 99 / 100]);
  }
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double s : samples) sum += s;
  std::printf("pairs %zu  p50 %.0f ns  p99 %.0f ns  mean %.0f ns\n", samples.size(), samples[samples.size() / 2],
              samples[samples.size() * 99 / 100], sum / samples.size());
  return 0;
}
