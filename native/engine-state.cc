#include "engine-state.h"

namespace kvroute {
namespace {

// max() that ignores an unreported (NaN) observation.
inline double atLeast(double shadow, double observed) { return observed > shadow ? observed : shadow; }

}  // namespace

EffectiveState effectiveState(const ShadowCounters& shadow, const ObservedState& observed, bool fresh,
                              double capacityBlocks) {
  EffectiveState e;
  e.running = static_cast<double>(shadow.running);
  e.waiting = static_cast<double>(shadow.waiting);
  e.pendingPrefill = static_cast<double>(shadow.prefillTokens);
  e.decodeBatch = static_cast<double>(shadow.running);
  e.kvUsage = static_cast<double>(shadow.activeBlocks) / capacityBlocks;
  if (fresh) {
    e.running = atLeast(e.running, observed.running);
    e.waiting = atLeast(e.waiting, observed.waiting);
    e.pendingPrefill = atLeast(e.pendingPrefill, observed.pendingPrefillTokens);
    e.decodeBatch = atLeast(e.decodeBatch, observed.decodeBatch);
    if (observed.kvBlocksTotal > 0) {
      e.kvUsage = atLeast(e.kvUsage, observed.kvBlocksUsed / observed.kvBlocksTotal);
    }
  }
  e.numRequests = e.running + e.waiting;
  return e;
}

}  // namespace kvroute
