// js-router-fleet — the instances: add, drain, remove, model groups, observed
// engine state, a slot's blocks and capacity. Every slot argument is checked
// live (requireSlot) before the core sees it.
#include <cmath>
#include <string>

#include "bindings/js-router-limits.h"
#include "bindings/js-router.h"
#include "bindings/napi-util.h"

namespace kvroute {

using jsrouter::kMaxSafeInteger;

uint32_t JsRouter::requireSlot(const Napi::Value& v) {
  const double slot = requireNumber(v, "slot");
  if (!(slot >= 0 && slot == std::floor(slot) && core().isLive(static_cast<uint32_t>(slot)))) {
    throwRangeError(v.Env(), kErrUnknownInstance, "instance slot " + formatNumber(slot) + " is not live");
  }
  return static_cast<uint32_t>(slot);
}

Napi::Value JsRouter::AddInstance(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throwTypeError(env, kErrArgType, "instance id must be a string");
  const double capacity = requireInteger(info[1], "capacityBlocks", 1, kMaxSafeInteger);
  const uint32_t slot = core().addInstance(info[0].As<Napi::String>().Utf8Value(), static_cast<uint64_t>(capacity));
  return Napi::Number::New(env, slot);
}

Napi::Value JsRouter::DrainInstance(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  core().drainInstance(requireSlot(info[0]), info.Length() < 2 || info[1].ToBoolean().Value());
  return info.Env().Undefined();
}

Napi::Value JsRouter::RemoveInstance(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  core().removeInstance(requireSlot(info[0]));
  return info.Env().Undefined();
}

// setInstanceGroups(slot, groups): groups a Uint32Array of group ids, or
// null/undefined for a wildcard (serves any model).
Napi::Value JsRouter::SetInstanceGroups(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  Napi::Env env = info.Env();
  const uint32_t slot = requireSlot(info[0]);
  if (info[1].IsNull() || info[1].IsUndefined()) {
    core().setInstanceGroups(slot, true, nullptr, 0);
    return env.Undefined();
  }
  if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array) {
    throwTypeError(env, kErrArgType, "groups must be a Uint32Array or null");
  }
  const Napi::Uint32Array groups = info[1].As<Napi::Uint32Array>();
  const size_t n = groups.ElementLength();
  for (size_t k = 0; k < n; ++k) {
    if (groups[k] >= Router::kMaxGroups) {
      throwRangeError(env, kErrArgValue,
                      "groups[" + std::to_string(k) + "] must be below " + std::to_string(Router::kMaxGroups) +
                          ", got " + std::to_string(groups[k]));
    }
  }
  core().setInstanceGroups(slot, false, groups.Data(), static_cast<uint32_t>(n));
  return env.Undefined();
}

Napi::Value JsRouter::SetObserved(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  ObservedState o;
  if (!info[1].IsNull() && !info[1].IsUndefined()) {
    const double* f = typedArrayData<double>(info[1], napi_float64_array, layout::kObservedFields, "observed");
    o.present = true;
    o.timestampMs = f[0];
    o.running = f[1];
    o.waiting = f[2];
    o.kvBlocksUsed = f[3];
    o.kvBlocksTotal = f[4];
    o.pendingPrefillTokens = f[5];
    o.maxPrefillRemaining = f[6];
    o.decodeBatch = f[7];
    if (!std::isfinite(o.timestampMs)) throwRangeError(info.Env(), kErrArgValue, "observed.timestampMs must be finite");
  }
  core().setObserved(slot, o);
  return info.Env().Undefined();
}

Napi::Value JsRouter::RemoveBlocks(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  RouteInput in;
  readIds(info[1], in, "hashIds");
  return Napi::Number::New(info.Env(), static_cast<double>(core().removeBlocks(slot, in.ids, in.n)));
}

Napi::Value JsRouter::ClearBlocks(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  core().clearBlocks(requireSlot(info[0]));
  return info.Env().Undefined();
}

Napi::Value JsRouter::SetCapacity(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  const double capacity = requireInteger(info[1], "capacityBlocks", 1, kMaxSafeInteger);
  return Napi::Number::New(info.Env(), static_cast<double>(core().setCapacity(slot, static_cast<uint64_t>(capacity))));
}

}  // namespace kvroute
