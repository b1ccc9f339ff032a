// format-number — a double as JavaScript's String(number) shows it (the
// shortest decimal that round-trips): how a bad number appears in an error
// message, in the bindings and in the plain C++ checks alike.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kvroute {

inline std::string formatNumber(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "Infinity" : "-Infinity";
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  return buf;
}

}  // namespace kvroute
