// js-router-limits — the argument limits the NativeRouter's binding files
// share (js-router*.cc): what a request's ids, tokens and capacities may be.
// TypeScript checks the same limits first with exact messages (src/core/);
// these re-checks keep garbage out of the core and throw a TypeError/RangeError.
#pragma once

#include <cstddef>
#include <string>

#include "bindings/napi-util.h"

namespace kvroute {
namespace jsrouter {

constexpr double kMaxSafeInteger = 9007199254740991.0;  // 2^53 - 1
constexpr double kBytesPerToken = 4;                    // prompt-text requests: token estimate
constexpr double kMaxBlockTokens = 1 << 24;

inline std::string elementError(const char* field, size_t i, double x) {
  return std::string(field) + "[" + std::to_string(i) + "] must be an integer in [0, 2^53), got " + formatNumber(x);
}

}  // namespace jsrouter
}  // namespace kvroute
