// The failure harness of core-test (harness.h): the trail, fail() and
// runPhase().
#include "harness.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace core_test {

Context g;

namespace {

constexpr size_t kTrailLength = 16;
int failures = 0;

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

}  // namespace

void note(std::string what, const uint64_t* ids, uint32_t n) {
  if (g.trail.size() == kTrailLength) g.trail.pop_front();
  g.trail.push_back(OpRecord{g.step, std::move(what), std::vector<uint64_t>(ids, ids + n)});
}

[[noreturn]] void fail(const std::string& message, const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  std::ostringstream os;
  os << "FAIL [" << g.phase << "] seed=" << g.seed << " step=" << g.step << " (" << (slash ? slash + 1 : file) << ":"
     << line << "): " << message << "\n  last operations (oldest first):\n";
  for (const OpRecord& r : g.trail) {
    os << "    #" << r.step << " " << r.what;
    if (!r.ids.empty()) os << " ids " << formatIds(r.ids);
    os << "\n";
  }
  throw Failure{os.str()};
}

void runPhase(const std::string& phase, uint64_t seed, const std::function<void(Totals&)>& body) {
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

int failedPhases() { return failures; }

}  // namespace core_test
