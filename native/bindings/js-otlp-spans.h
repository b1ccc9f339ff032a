// js-otlp-spans — the JavaScript face of otlp/span-ops (class OtlpSpanWriter):
// the proxy's OTLP span encoder's native half (src/proxy/observe/otlp-native.ts
// drives it; src/core/native.ts declares it).
//
// block(id, bytes) keeps a pre-encoded block under a small id; clear() forgets
// them all. writeRequests(rows, rowCount, layout, ids, idBytes, out, at)
// writes the spans of requests' rows (otlp/request-rows.h) into `out` from
// `at` and returns where they end, or -1 when they do not fit (the caller
// grows `out` and calls again); write(ops, opCount, ids, out, at) does the
// same from an op stream (otlp/span-ops.h). A bad row or op throws a
// RangeError naming where it is and what is wrong, and nothing is promised
// about out[at, ...).
#pragma once

#include <napi.h>

#include <vector>

#include "otlp/request-rows.h"
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
  Napi::Value WriteRequests(const Napi::CallbackInfo& info);

  SpanBlocks blocks_;
  SpanIdSource spanIds_;
  // writeRequests' scratch, reused: the rows' ops, the id bytes, where each request's ops begin.
  std::vector<double> ops_;
  std::vector<uint8_t> ids_;
  std::vector<RowOps> requests_;
};

}  // namespace kvroute
