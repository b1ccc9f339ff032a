#include "bindings/js-otlp-spans.h"

#include <string>

#include "bindings/napi-util.h"

namespace kvroute {

Napi::Function JsOtlpSpanWriter::Define(Napi::Env env) {
  return DefineClass(env, "OtlpSpanWriter",
                     {
                         InstanceMethod<&JsOtlpSpanWriter::Block>("block"),
                         InstanceMethod<&JsOtlpSpanWriter::Clear>("clear"),
                         InstanceMethod<&JsOtlpSpanWriter::Write>("write"),
                         InstanceMethod<&JsOtlpSpanWriter::WriteRequests>("writeRequests"),
                     });
}

JsOtlpSpanWriter::JsOtlpSpanWriter(const Napi::CallbackInfo& info) : Napi::ObjectWrap<JsOtlpSpanWriter>(info) {}

Napi::Value JsOtlpSpanWriter::Block(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const size_t id = static_cast<size_t>(requireInteger(info[0], "id", 0, SpanBlocks::kMaxBlocks - 1));
  auto bytes = requireTypedArray<uint8_t>(info[1], napi_uint8_array, "bytes", "Uint8Array");
  if (!blocks_.set(id, bytes.Data(), bytes.ElementLength())) {
    throwRangeError(env, kErrArgValue,
                    "bytes must be 1 to " + std::to_string(SpanBlocks::kMaxBlockBytes) + " bytes long, got " +
                        std::to_string(bytes.ElementLength()));
  }
  return env.Undefined();
}

Napi::Value JsOtlpSpanWriter::Clear(const Napi::CallbackInfo& info) {
  blocks_.clear();
  return info.Env().Undefined();
}

Napi::Value JsOtlpSpanWriter::Write(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto ops = requireTypedArray<double>(info[0], napi_float64_array, "ops", "Float64Array");
  const size_t opCount = static_cast<size_t>(requireInteger(info[1], "opCount", 0, double(ops.ElementLength())));
  auto ids = requireTypedArray<uint8_t>(info[2], napi_uint8_array, "ids", "Uint8Array");
  auto out = requireTypedArray<uint8_t>(info[3], napi_uint8_array, "out", "Uint8Array");
  const size_t at = static_cast<size_t>(requireInteger(info[4], "at", 0, double(out.ElementLength())));
  const SpanOpsResult result =
      writeSpanOps(ops.Data(), opCount, ids.Data(), ids.ElementLength(), blocks_, out.Data(), at, out.ElementLength());
  if (result.status == SpanOpsResult::kBadOp) {
    throwRangeError(env, kErrArgValue, "ops[" + std::to_string(result.opIndex) + "]: " + result.problem);
  }
  return Napi::Number::New(env, result.status == SpanOpsResult::kOk ? double(result.end) : -1);
}

Napi::Value JsOtlpSpanWriter::WriteRequests(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto rows = requireTypedArray<double>(info[0], napi_float64_array, "rows", "Float64Array");
  const size_t rowCount = static_cast<size_t>(requireInteger(info[1], "rowCount", 0, double(rows.ElementLength())));
  auto layout = requireTypedArray<double>(info[2], napi_float64_array, "layout", "Float64Array");
  if (layout.ElementLength() != kLayoutSlots) {
    throwRangeError(env, kErrArgValue,
                    "layout must hold " + std::to_string(kLayoutSlots) + " block ids, got " +
                        std::to_string(layout.ElementLength()));
  }
  auto ids = requireTypedArray<uint8_t>(info[3], napi_uint8_array, "ids", "Uint8Array");
  const size_t idBytes = static_cast<size_t>(requireInteger(info[4], "idBytes", 0, double(ids.ElementLength())));
  auto out = requireTypedArray<uint8_t>(info[5], napi_uint8_array, "out", "Uint8Array");
  const size_t at = static_cast<size_t>(requireInteger(info[6], "at", 0, double(out.ElementLength())));
  ops_.clear();
  requests_.clear();
  ids_.assign(ids.Data(), ids.Data() + idBytes);
  const RequestRowsResult rowsResult =
      expandRequestRows(rows.Data(), rowCount, layout.Data(), spanIds_, ops_, ids_, requests_);
  if (!rowsResult.ok) {
    throwRangeError(env, kErrArgValue, "rows[" + std::to_string(rowsResult.rowAt) + "]: " + rowsResult.problem);
  }
  const SpanOpsResult result =
      writeSpanOps(ops_.data(), ops_.size(), ids_.data(), ids_.size(), blocks_, out.Data(), at, out.ElementLength());
  if (result.status == SpanOpsResult::kBadOp) {
    // The request whose ops hold the bad one: the last to begin at or before it.
    size_t row = 0;
    for (const RowOps& request : requests_)
      if (request.opStart <= result.opIndex) row = request.rowStart;
    throwRangeError(env, kErrArgValue, "the request at rows[" + std::to_string(row) + "]: " + result.problem);
  }
  return Napi::Number::New(env, result.status == SpanOpsResult::kOk ? double(result.end) : -1);
}

}  // namespace kvroute
