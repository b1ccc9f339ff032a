// js-router-stats — what the router reports: per-instance stats (STAT_FIELDS
// in src/core/core-router.ts, in that order), reason counts, fleet counts, the
// invariant check and the feed's status. Each call drains the ticket queue
// first, so it reads the same state an eager caller would.
#include <algorithm>

#include "bindings/js-router.h"
#include "bindings/napi-util.h"

namespace kvroute {

Napi::Value JsRouter::Stats(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  double* out = typedArrayData<double>(info[1], napi_float64_array, layout::kStatsFields, "stats");
  const InstanceStats s = core().stats(slot);
  const double fields[layout::kStatsFields] = {
      static_cast<double>(s.capacityBlocks),
      static_cast<double>(s.blocks),
      static_cast<double>(s.segments),
      static_cast<double>(s.bytes),
      static_cast<double>(s.shadow.running),
      static_cast<double>(s.shadow.waiting),
      static_cast<double>(s.shadow.prefillTokens),
      static_cast<double>(s.shadow.activeBlocks),
      s.effective.running,
      s.effective.waiting,
      s.effective.pendingPrefill,
      s.effective.decodeBatch,
      s.effective.kvUsage,
      s.observedFresh ? 1.0 : 0.0,
      static_cast<double>(s.routed),
      static_cast<double>(s.completed),
      static_cast<double>(s.aborted),
      core().isDrained(slot) ? 1.0 : 0.0,
      s.effective.numRequests,
  };
  std::copy(fields, fields + layout::kStatsFields, out);
  return info.Env().Undefined();
}

Napi::Value JsRouter::ReasonCounts(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  double* out = typedArrayData<double>(info[0], napi_float64_array, kReasonCount, "reasonCounts");
  const auto& counts = core().reasonCounts();
  for (size_t r = 0; r < counts.size(); ++r) out[r] = static_cast<double>(counts[r]);
  return info.Env().Undefined();
}

Napi::Value JsRouter::Counts(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  double* out = typedArrayData<double>(info[0], napi_float64_array, layout::kCountFields, "counts");
  out[0] = static_cast<double>(core().openTickets());
  out[1] = static_cast<double>(core().sessionCount());
  out[2] = static_cast<double>(core().slotCount());
  out[3] = static_cast<double>(core().fleetBytes());
  return info.Env().Undefined();
}

Napi::Value JsRouter::CheckInvariants(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  return Napi::String::New(info.Env(), core().checkInvariants());
}

// feedStatus() -> -1 without a feed, else shm::FeedStatus
Napi::Value JsRouter::FeedStatus(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  return Napi::Number::New(info.Env(), router_->feedStatus());
}

}  // namespace kvroute
