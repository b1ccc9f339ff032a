// js-router-costs — min_ttft's per-instance prices from JavaScript
// (core/instance-costs.h): setInstanceCosts(slot, costs | null) and
// setReturningTokens(slot, tokens). Both are checked here, before the core
// changes: a bad value is a RangeError naming the field, and nothing is stored.
#include <cmath>
#include <limits>
#include <string>

#include "bindings/js-layout.h"
#include "bindings/js-router.h"
#include "bindings/napi-util.h"

namespace kvroute {

namespace {

void requireCost(Napi::Env env, double value, const char* field, bool positive) {
  if (std::isfinite(value) && (positive ? value > 0 : value >= 0)) return;
  throwRangeError(env, kErrArgValue,
                  std::string("costs.") + field + " must be a finite number " + (positive ? "> 0" : ">= 0") + ", got " +
                      std::to_string(value));
}

}  // namespace

// costs: a Float64Array of kCostFields [secondsPerToken, overheadSeconds,
// interference (NaN: the policy's batchWeight)], or null/undefined for
// token-equivalents.
Napi::Value JsRouter::SetInstanceCosts(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  Napi::Env env = info.Env();
  const uint32_t slot = requireSlot(info[0]);
  if (info[1].IsNull() || info[1].IsUndefined()) {
    core().setInstanceCosts(slot, nullptr);
    return env.Undefined();
  }
  const double* f = typedArrayData<double>(info[1], napi_float64_array, layout::kCostFields, "costs");
  InstanceCosts costs;
  costs.secondsPerToken = f[layout::kCostSecondsPerToken];
  costs.overheadSeconds = f[layout::kCostOverheadSeconds];
  costs.interference = f[layout::kCostInterference];
  requireCost(env, costs.secondsPerToken, "secondsPerToken", true);
  requireCost(env, costs.overheadSeconds, "overheadSeconds", false);
  if (!std::isnan(costs.interference)) requireCost(env, costs.interference, "interference", false);
  core().setInstanceCosts(slot, &costs);
  return env.Undefined();
}

Napi::Value JsRouter::SetReturningTokens(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  const double tokens = requireInRange(info[1], "returningTokens", 0, std::numeric_limits<double>::max());
  core().setReturningTokens(slot, tokens);
  return info.Env().Undefined();
}

}  // namespace kvroute
