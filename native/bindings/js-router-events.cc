// js-router-events — engines' KV events into the event index: a slot's event
// feed switch, applyKvEvents(slot, packed) (the whole packed stream validated
// before any of it applies, so bad input throws and changes nothing), clearing,
// and the per-slot event stats (EVENT_STAT_FIELDS in src/core/core-router.ts).
#include <algorithm>
#include <cmath>
#include <string>

#include "bindings/js-router.h"
#include "bindings/napi-util.h"

namespace kvroute {

Napi::Value JsRouter::SetEventFed(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  if (!info[1].IsBoolean()) throwTypeError(info.Env(), kErrArgType, "on must be a boolean");
  core().setEventFed(slot, info[1].As<Napi::Boolean>().Value());
  return info.Env().Undefined();
}

namespace {

// packed[array] as a typed array of `type`, and packed[lengthField], an
// integer in [0, the array's length]: the elements a reader may touch.
template <typename T>
const T* packedArray(const Napi::Object& packed, const char* array, const char* lengthField, napi_typedarray_type type,
                     const char* typeName, size_t& length) {
  const Napi::Value v = packed.Get(array);
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type) {
    throwTypeError(packed.Env(), kErrArgType, std::string("packed.") + array + " must be a " + typeName);
  }
  auto typed = v.As<Napi::TypedArrayOf<T>>();
  const Napi::Value n = packed.Get(lengthField);
  if (!n.IsNumber())
    throwTypeError(packed.Env(), kErrArgType, std::string("packed.") + lengthField + " must be a number");
  const double x = n.As<Napi::Number>().DoubleValue();
  if (!(x >= 0 && x <= static_cast<double>(typed.ElementLength()) && x == std::floor(x))) {
    throwRangeError(packed.Env(), kErrArgValue,
                    std::string("packed.") + lengthField + " must be an integer in [0, " + array +
                        ".length = " + std::to_string(typed.ElementLength()) + "], got " + formatNumber(x));
  }
  length = static_cast<size_t>(x);
  return typed.Data();
}

}  // namespace

Napi::Value JsRouter::ApplyKvEvents(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  Napi::Env env = info.Env();
  const uint32_t slot = requireSlot(info[0]);
  if (!info[1].IsObject()) throwTypeError(env, kErrArgType, "packed must be an object (PackedKvEvents)");
  const Napi::Object packed = info[1].As<Napi::Object>();
  PackedKvEvents p;
  p.ops = packedArray<uint32_t>(packed, "ops", "opsLength", napi_uint32_array, "Uint32Array", p.opsLength);
  p.hashes =
      packedArray<uint64_t>(packed, "hashes", "hashesLength", napi_biguint64_array, "BigUint64Array", p.hashesLength);
  p.tokens = packedArray<uint32_t>(packed, "tokens", "tokensLength", napi_uint32_array, "Uint32Array", p.tokensLength);
  const std::string error = EventIndex::validate(p);
  if (!error.empty()) throwRangeError(env, kErrArgValue, error);
  core().applyKvEvents(slot, p);
  return env.Undefined();
}

Napi::Value JsRouter::ClearKvEvents(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  core().clearKvEvents(requireSlot(info[0]));
  return info.Env().Undefined();
}

Napi::Value JsRouter::EventStats(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  double* out = typedArrayData<double>(info[1], napi_float64_array, layout::kEventStatsFields, "eventStats");
  const EventIndex& events = core().events();
  const EventCounters& c = events.counters(slot);
  const double fields[layout::kEventStatsFields] = {
      static_cast<double>(c.stored),
      static_cast<double>(c.removed),
      static_cast<double>(c.cleared),
      static_cast<double>(c.ignored),
      static_cast<double>(c.orphaned),
      static_cast<double>(c.unknownRemoved),
      static_cast<double>(events.heldKeys(slot)),
      static_cast<double>(events.engineBlocks(slot)),
      events.fed(slot) ? 1.0 : 0.0,
  };
  std::copy(fields, fields + layout::kEventStatsFields, out);
  return info.Env().Undefined();
}

}  // namespace kvroute
