// js-router-peers — what other router replicas say (docs/scale-out.md, "The
// load plane"): setPeerLoad(slot, load | null) and pinSession(session, group,
// slot). Both are checked here before the core changes: a bad value is a
// RangeError/TypeError naming the field, and nothing is stored.
#include <cmath>
#include <string>

#include "bindings/js-layout.h"
#include "bindings/js-router.h"
#include "bindings/napi-util.h"

namespace kvroute {

namespace {

// A peer counter: an integer in [0, 2^53), the range a JavaScript number holds exactly.
int64_t requirePeerCount(Napi::Env env, double value, const char* field) {
  if (!(value >= 0 && value <= 9007199254740991.0 && value == std::floor(value))) {
    throwRangeError(env, kErrArgValue,
                    std::string("peerLoad.") + field + " must be an integer >= 0, got " + std::to_string(value));
  }
  return static_cast<int64_t>(value);
}

}  // namespace

// load: a Float64Array of kPeerLoadFields [running, waiting, prefillTokens,
// activeBlocks], or null/undefined for none.
Napi::Value JsRouter::SetPeerLoad(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  ShadowCounters peer;
  if (!info[1].IsNull() && !info[1].IsUndefined()) {
    const double* f = typedArrayData<double>(info[1], napi_float64_array, layout::kPeerLoadFields, "peerLoad");
    const Napi::Env env = info.Env();
    peer.running = requirePeerCount(env, f[0], "running");
    peer.waiting = requirePeerCount(env, f[1], "waiting");
    peer.prefillTokens = requirePeerCount(env, f[2], "prefillTokens");
    peer.activeBlocks = requirePeerCount(env, f[3], "activeBlocks");
  }
  core().setPeerLoad(slot, peer);
  return info.Env().Undefined();
}

// pinSession(session: string, group: -1 | a known group id, slot).
Napi::Value JsRouter::PinSession(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throwTypeError(env, kErrArgType, "session must be a string");
  RouteInput in;
  readSession(info[0], in);
  Router& router = core();
  const double group = requireInteger(info[1], "group", -1, static_cast<double>(router.groupCount()) - 1);
  const uint32_t slot = requireSlot(info[2]);
  router.pinSession(in.sessionKey, static_cast<int32_t>(group), slot);
  return env.Undefined();
}

}  // namespace kvroute
