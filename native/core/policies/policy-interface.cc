#include "core/policies/policy-interface.h"

#include "util/xxhash64.h"

namespace kvroute {

void Policy::score(DecisionContext& ctx) const {
  for (uint32_t s : ctx.candidates) ctx.scores[s] = ctx.eff[s].numRequests;
}

uint64_t firstBlockKey(uint64_t id) {
  uint8_t le[8];
  for (int b = 0; b < 8; ++b) le[b] = static_cast<uint8_t>(id >> (8 * b));
  return xxhash64(le, 8, 0);
}

uint64_t pinKey(uint64_t sessionKey, int32_t group) {
  if (group < 0) return sessionKey;
  uint8_t le[4];
  for (int b = 0; b < 4; ++b) le[b] = static_cast<uint8_t>(static_cast<uint32_t>(group) >> (8 * b));
  return xxhash64(le, 4, sessionKey);
}

}  // namespace kvroute
