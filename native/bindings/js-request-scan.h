// js-request-scan — the JavaScript face of the request scanner
// (request-scan.h), class RequestScanner.
//
// new RequestScanner(out: Float64Array, values: unknown[])
//   One per thread (src/core/request-scanner.ts). `out` (kScanOutFields
//   entries) and `values` (4 slots) are the caller's, written by scan():
//     out:    outcome, code, param, fallback, stream, ids kind, inputTokens,
//             blockTokens (ScanResult's enums as numbers), priority and
//             the output cap (max_completion_tokens / max_tokens; each NaN
//             when absent)
//     values: model, user (or undefined), error message (or undefined), the
//             body to forward when hash_ids were stripped (a Buffer, or
//             undefined: forward the original bytes)
//
// scan(bytes: Uint8Array, endpoint: 0 | 1, chunkBytes: number, strip: boolean)
//   Synchronous, on the caller's thread. Returns the ids (BigUint64Array from
//   the prompt, Float64Array from hash_ids), or undefined unless the outcome
//   is ok. The parser's buffers are kept for the next call unless the body
//   was over kScanKeepBytes.
//
// scanAsync(bytes, endpoint, chunkBytes, strip): Promise<object>
//   The same scan on the libuv threadpool (an AsyncWorker whose Execute
//   touches no JavaScript, with a parser of its own): the promise resolves to
//   { outcome, code, param, fallback, message, model, user, stream, priority,
//   maxTokens, idsKind, ids, inputTokens, blockTokens, forward } (priority and
//   maxTokens undefined when absent), where ids and forward (a
//   Uint8Array) wrap the worker's memory without a copy. The bytes are copied
//   at the call (why: ScanWorker's constructor), so the caller may change,
//   transfer or drop them at once.
#pragma once

#include <napi.h>

#include "scan/request-scan.h"

namespace kvroute {

constexpr size_t kScanOutFields = 10;
constexpr size_t kScanValueSlots = 4;
// The synchronous scanner frees its parser after a body larger than this.
constexpr size_t kScanKeepBytes = 1 << 20;

class JsRequestScanner : public Napi::ObjectWrap<JsRequestScanner> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit JsRequestScanner(const Napi::CallbackInfo& info);

 private:
  Napi::Value Scan(const Napi::CallbackInfo& info);
  Napi::Value ScanAsync(const Napi::CallbackInfo& info);

  RequestScanner scanner_;
  ScanResult result_;
  double* out_ = nullptr;
  Napi::Reference<Napi::Float64Array> outRef_;
  Napi::Reference<Napi::Array> valuesRef_;
};

}  // namespace kvroute
