#include "bindings/js-request-scan.h"

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "bindings/napi-util.h"
#include "scan/json-bytes.h"

namespace kvroute {
namespace {

struct ScanArgs {
  const uint8_t* data = nullptr;
  size_t length = 0;
  ScanOptions options;
};

ScanArgs readArgs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  ScanArgs args;
  napi_typedarray_type type;
  void* data = nullptr;
  if (napi_get_typedarray_info(env, info[0], &type, &args.length, &data, nullptr, nullptr) != napi_ok ||
      type != napi_uint8_array) {
    throwTypeError(env, kErrArgType, "bytes must be a Uint8Array");
  }
  args.data = static_cast<const uint8_t*>(data);
  const double endpoint = requireInteger(info[1], "endpoint", 0, 1);
  args.options.endpoint = endpoint == 0 ? ScanEndpoint::kChat : ScanEndpoint::kCompletions;
  args.options.chunkBytes = static_cast<size_t>(requireInteger(info[2], "chunkBytes", 1, 1 << 24));
  args.options.stripRanges = info[3].ToBoolean().Value();
  return args;
}

// A typed array over `values`' memory, handed to JavaScript without a copy
// (the ArrayBuffer's finalizer frees it); a copy where external buffers are
// not allowed.
template <typename T>
Napi::ArrayBuffer adopt(Napi::Env env, std::vector<T>&& values) {
  const size_t bytes = values.size() * sizeof(T);
  if (bytes == 0) return Napi::ArrayBuffer::New(env, 0);
  auto* held = new std::vector<T>(std::move(values));
  napi_value buffer = nullptr;
  const napi_status status = napi_create_external_arraybuffer(
      env, held->data(), bytes,
      [](napi_env finalizeEnv, void*, void* hint) {
        auto* v = static_cast<std::vector<T>*>(hint);
        int64_t ignored = 0;
        napi_adjust_external_memory(finalizeEnv, -static_cast<int64_t>(v->size() * sizeof(T)), &ignored);
        delete v;
      },
      held, &buffer);
  if (status == napi_ok) {
    int64_t ignored = 0;
    napi_adjust_external_memory(env, static_cast<int64_t>(bytes), &ignored);
    return Napi::ArrayBuffer(env, buffer);
  }
  Napi::ArrayBuffer copy = Napi::ArrayBuffer::New(env, bytes);
  std::memcpy(copy.Data(), held->data(), bytes);
  delete held;
  return copy;
}

Napi::Value idsCopy(Napi::Env env, const ScanResult& r) {
  if (r.ids == ScanIds::kBody) {
    auto ids = Napi::Float64Array::New(env, r.bodyIds.size());
    if (!r.bodyIds.empty()) std::memcpy(ids.Data(), r.bodyIds.data(), r.bodyIds.size() * sizeof(double));
    return ids;
  }
  auto ids = Napi::BigUint64Array::New(env, r.promptIds.size());
  if (!r.promptIds.empty()) std::memcpy(ids.Data(), r.promptIds.data(), r.promptIds.size() * sizeof(uint64_t));
  return ids;
}

Napi::Value stringOrUndefined(Napi::Env env, bool present, const std::string& s) {
  return present ? Napi::String::New(env, s) : env.Undefined();
}

class ScanWorker : public Napi::AsyncWorker {
 public:
  // Copies the caller's bytes, here on the JavaScript thread, before the scan
  // is queued. A reference to the typed array would keep it from being
  // collected, but not its memory from moving or changing: a transfer
  // (postMessage, structuredClone with `transfer`, ArrayBuffer.transfer)
  // detaches the buffer and hands its memory to another ArrayBuffer, which may
  // be freed while the threadpool reads it, and JavaScript may write the bytes
  // meanwhile (a data race). A private copy makes the scan's input the bytes
  // as they were at the call, whatever the caller does next; it costs one
  // memcpy of the body, small beside the scan (which copies it again, into
  // simdjson's padded buffer).
  ScanWorker(Napi::Env env, const ScanArgs& args)
      : Napi::AsyncWorker(env, "kvroute.scanRequest"),
        deferred_(Napi::Promise::Deferred::New(env)),
        bytes_(args.data, args.data + args.length),
        args_(args) {
    args_.data = bytes_.data();
  }

  Napi::Promise promise() const { return deferred_.Promise(); }

  // On the threadpool: no JavaScript, no Node-API.
  void Execute() override {
    try {
      RequestScanner scanner;
      scanner.scan(args_.data, args_.length, args_.options, result_);
      if (result_.outcome == ScanOutcome::kOk && !result_.strip.empty()) {
        forward_.resize(args_.length);
        forward_.resize(copyStripped(args_.data, args_.length, result_.strip, forward_.data()));
      }
    } catch (const std::bad_alloc&) {
      SetError("out of memory while scanning a request body");
    }
  }

  void OnOK() override {
    Napi::Env env = Env();
    const ScanResult& r = result_;
    Napi::Object o = Napi::Object::New(env);
    o.Set("outcome", Napi::Number::New(env, static_cast<double>(r.outcome)));
    o.Set("code", Napi::Number::New(env, static_cast<double>(r.code)));
    o.Set("param", Napi::Number::New(env, static_cast<double>(r.param)));
    o.Set("fallback", Napi::Number::New(env, static_cast<double>(r.fallback)));
    o.Set("message", stringOrUndefined(env, r.outcome == ScanOutcome::kError, r.message));
    if (r.outcome == ScanOutcome::kOk) {
      o.Set("model", Napi::String::New(env, r.model));
      o.Set("user", stringOrUndefined(env, r.hasUser, r.user));
      o.Set("stream", Napi::Boolean::New(env, r.stream));
      o.Set("priority", r.hasPriority ? Napi::Number::New(env, r.priority) : env.Undefined());
      o.Set("maxTokens", r.hasMaxTokens ? Napi::Number::New(env, r.maxTokens) : env.Undefined());
      o.Set("idsKind", Napi::Number::New(env, static_cast<double>(r.ids)));
      if (r.ids == ScanIds::kBody) {
        const size_t n = result_.bodyIds.size();
        o.Set("ids", Napi::Float64Array::New(env, n, adopt(env, std::move(result_.bodyIds)), 0));
      } else {
        const size_t n = result_.promptIds.size();
        o.Set("ids", Napi::BigUint64Array::New(env, n, adopt(env, std::move(result_.promptIds)), 0));
      }
      o.Set("inputTokens", Napi::Number::New(env, r.inputTokens));
      o.Set("blockTokens", Napi::Number::New(env, r.blockTokens));
      if (!r.strip.empty()) {
        const size_t n = forward_.size();
        o.Set("forward", Napi::Uint8Array::New(env, n, adopt(env, std::move(forward_)), 0));
      }
    }
    deferred_.Resolve(o);
  }

  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  std::vector<uint8_t> bytes_;  // the caller's bytes, copied; args_.data points here
  ScanArgs args_;
  ScanResult result_;
  std::vector<uint8_t> forward_;
};

}  // namespace

Napi::Function JsRequestScanner::Define(Napi::Env env) {
  return DefineClass(env, "RequestScanner",
                     {
                         InstanceMethod("scan", &JsRequestScanner::Scan),
                         InstanceMethod("scanAsync", &JsRequestScanner::ScanAsync),
                     });
}

JsRequestScanner::JsRequestScanner(const Napi::CallbackInfo& info) : Napi::ObjectWrap<JsRequestScanner>(info) {
  Napi::Env env = info.Env();
  out_ = typedArrayData<double>(info[0], napi_float64_array, kScanOutFields, "out");
  if (!info[1].IsArray()) throwTypeError(env, kErrArgType, "values must be an array");
  outRef_ = Napi::Persistent(info[0].As<Napi::Float64Array>());
  valuesRef_ = Napi::Persistent(info[1].As<Napi::Array>());
}

Napi::Value JsRequestScanner::Scan(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const ScanArgs args = readArgs(info);
  scanner_.scan(args.data, args.length, args.options, result_);
  if (args.length > kScanKeepBytes) scanner_.release();
  const ScanResult& r = result_;
  const bool ok = r.outcome == ScanOutcome::kOk;
  out_[0] = static_cast<double>(r.outcome);
  out_[1] = static_cast<double>(r.code);
  out_[2] = static_cast<double>(r.param);
  out_[3] = static_cast<double>(r.fallback);
  out_[4] = r.stream ? 1 : 0;
  out_[5] = ok ? static_cast<double>(r.ids) : 0;
  out_[6] = r.inputTokens;
  out_[7] = r.blockTokens;
  // NaN: absent (a priority or cap is always an integer when present).
  out_[8] = ok && r.hasPriority ? r.priority : std::numeric_limits<double>::quiet_NaN();
  out_[9] = ok && r.hasMaxTokens ? r.maxTokens : std::numeric_limits<double>::quiet_NaN();
  Napi::Array values = valuesRef_.Value();
  values.Set(uint32_t{0}, stringOrUndefined(env, ok, r.model));
  values.Set(uint32_t{1}, stringOrUndefined(env, ok && r.hasUser, r.user));
  values.Set(uint32_t{2}, stringOrUndefined(env, r.outcome == ScanOutcome::kError, r.message));
  if (ok && !r.strip.empty()) {
    size_t dropped = 0;
    for (size_t k = 0; k + 1 < r.strip.size(); k += 2) dropped += r.strip[k + 1] - r.strip[k];
    auto forward = Napi::Buffer<uint8_t>::New(env, args.length - dropped);
    copyStripped(args.data, args.length, r.strip, forward.Data());
    values.Set(uint32_t{3}, forward);
  } else {
    values.Set(uint32_t{3}, env.Undefined());
  }
  return ok ? idsCopy(env, r) : env.Undefined();
}

Napi::Value JsRequestScanner::ScanAsync(const Napi::CallbackInfo& info) {
  const ScanArgs args = readArgs(info);
  auto* worker = new ScanWorker(info.Env(), args);
  Napi::Promise promise = worker->promise();
  worker->Queue();  // the worker deletes itself once settled
  return promise;
}

}  // namespace kvroute
