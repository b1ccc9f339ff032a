#include "fuzz/fuzz-input.h"

#include <cstdio>
#include <cstdlib>

namespace kvroute::fuzz {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

}  // namespace kvroute::fuzz
