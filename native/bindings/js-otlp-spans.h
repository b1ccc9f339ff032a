// js-otlp-spans — the JavaScript face of otlp/span-ops (class OtlpSpanWriter):
// the proxy's OTLP span encoder's native half (src/proxy/observe/otlp-native.ts
// drives it; src/core/native.ts declares it).
//
// block(id, bytes) keeps a pre-encoded block under a small id; clear() forgets
// them all; write(ops, opCount, ids, out, at) writes the spans the ops describe
// into `out` from `at` and returns where they end, or -1 when they do not fit
// (the caller grows `out` and calls again). A bad op throws a RangeError naming
// its index and what is wrong, and nothing is promised about out[at, ...).
#pragma once

#include <napi.h>

#include "otlp/span-ops.h"

namespace kvroute {

class JsOtlpSpanWriter : public Napi::ObjectWrap<JsOtlpSpanWriter> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit JsOtlpSpanWriter(const Napi::CallbackInfo& info);

 private:
  Napi::Value Block(const Napi::CallbackInfo& info);
  Napi::Value Clear(const Napi::CallbackInfo& info);
  Napi::Value Write(const Napi::CallbackInfo& info);

  SpanBlocks blocks_;
};

}  // namespace kvroute
