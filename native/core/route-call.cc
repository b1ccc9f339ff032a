#include "core/route-call.h"

#include <cmath>
#include <string>

#include "util/format-number.h"

namespace kvroute {

void bindRequestToRouter(const Router& router, double group, RouteInput& in) {
  in.group = -1;
  if (group == -1) return;
  const uint32_t count = router.groupCount();
  if (!(group >= 0 && group < static_cast<double>(count) && group == std::floor(group))) {
    throw RequestRangeError("group must be -1 or a known group id below " + std::to_string(count) + ", got " +
                            formatNumber(group));
  }
  in.group = static_cast<int32_t>(group);
}

}  // namespace kvroute
