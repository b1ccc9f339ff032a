// The failure harness shared by every core-test phase: a trail of the last
// operations (note()), CHECK() which throws a Failure naming the phase, seed,
// step and source line, the per-phase Totals, and runPhase(), which runs one
// phase, catches its Failure and prints one line of totals.
//
// Hazard: the trail lives in one global Context (g), reset by runPhase(), so
// phases run one at a time on one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace core_test {

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
extern Context g;

// Records an operation (and its ids) in the trail printed on a failure.
void note(std::string what, const uint64_t* ids = nullptr, uint32_t n = 0);

// Throws a Failure carrying the message, the place and the trail.
[[noreturn]] void fail(const std::string& message, const char* file, int line);

#define CHECK(cond, ...)                                        \
  do {                                                          \
    if (!(cond)) {                                              \
      std::ostringstream check_os_;                             \
      check_os_ << "check `" #cond "` failed: " << __VA_ARGS__; \
      ::core_test::fail(check_os_.str(), __FILE__, __LINE__);   \
    }                                                           \
  } while (0)

struct Totals {
  uint64_t ops = 0, commits = 0, evicted = 0, removed = 0, fullChecks = 0, maxSegments = 0, offloads = 0;
};

// Runs one phase with a fresh trail; prints its totals, or its failure.
void runPhase(const std::string& phase, uint64_t seed, const std::function<void(Totals&)>& body);

// The number of phases that failed so far.
int failedPhases();

}  // namespace core_test
