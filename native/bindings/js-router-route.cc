// js-router-route — the hot path: route(ids, session) and match(ids). One
// synchronous crossing per request: the numeric arguments come from the
// caller's request slab (REQUEST_* in src/core/core-router.ts), the ids as a
// typed array (zero-copy for BigUint64Array) or prompt text hashed here, and
// the decision goes to caller-owned typed arrays. Raw Node-API calls, one
// query per argument; everything is validated before the router is touched.
#include <cmath>
#include <string>

#include "bindings/js-router-limits.h"
#include "bindings/js-router.h"
#include "bindings/napi-util.h"
#include "core/route-call.h"
#include "hash/prompt-hash.h"
#include "util/xxhash64.h"

namespace kvroute {

using jsrouter::elementError;
using jsrouter::kBytesPerToken;
using jsrouter::kMaxBlockTokens;
using jsrouter::kMaxSafeInteger;

namespace {

// The plain C++ checks' error (core/route-call.h) as the RangeError the other checks throw.
Napi::Error requestError(Napi::Env env, const RequestRangeError& error) {
  Napi::Error js = Napi::RangeError::New(env, error.what());
  js.Set("code", Napi::String::New(env, kErrArgValue));
  return js;
}

}  // namespace

napi_value JsRouter::RouteCallback(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2] = {nullptr, nullptr};
  void* data = nullptr;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, &data) != napi_ok) return nullptr;
  if (argc < 2) {
    napi_value undefined = nullptr;
    napi_get_undefined(env, &undefined);
    for (size_t k = argc; k < 2; ++k) argv[k] = undefined;
  }
  // The same exception boundary node-addon-api puts around ObjectWrap methods
  // (NODE_ADDON_API_CPP_EXCEPTIONS_ALL): nothing may escape into V8.
  try {
    const RouteHandle* handle = static_cast<const RouteHandle*>(data);
    if (handle == nullptr || handle->router == nullptr) {
      throw Napi::Error::New(env, "route() called on a router that has been finalized");
    }
    return handle->router->route(env, argv[0], argv[1]);
  } catch (const Napi::Error& error) {
    error.ThrowAsJavaScriptException();
  } catch (const RequestRangeError& error) {
    requestError(env, error).ThrowAsJavaScriptException();
  } catch (const std::exception& error) {
    Napi::Error::New(env, error.what()).ThrowAsJavaScriptException();
  } catch (...) {
    Napi::Error::New(env, "a native exception was thrown").ThrowAsJavaScriptException();
  }
  return nullptr;
}

Napi::Value JsRouter::SetExplainBuffers(const Napi::CallbackInfo& info) {
  auto matched = info[0].As<Napi::Int32Array>();
  auto scores = info[1].As<Napi::Float64Array>();
  matched_ = typedArrayData<int32_t>(info[0], napi_int32_array, 0, "matched");
  scores_ = typedArrayData<double>(info[1], napi_float64_array, 0, "scores");
  explainCapacity_ = std::min(matched.ElementLength(), scores.ElementLength());
  matchedRef_ = Napi::Persistent(matched);
  scoresRef_ = Napi::Persistent(scores);
  // The terms buffer is optional; without it route() writes none.
  if (info.Length() > 2 && !info[2].IsUndefined()) {
    auto terms = info[2].As<Napi::Float64Array>();
    terms_ = typedArrayData<double>(info[2], napi_float64_array, 0, "terms");
    explainCapacity_ = std::min(explainCapacity_, terms.ElementLength() / kTermCount);
    termsRef_ = Napi::Persistent(terms);
  } else {
    terms_ = nullptr;
    termsRef_.Reset();
  }
  return info.Env().Undefined();
}

// The hot path uses raw Node-API calls: one typeof and one typed-array query
// per argument (node-addon-api's wrappers would query the same array several
// times).
void JsRouter::readIds(const Napi::Value& v, RouteInput& in, const char* field) {
  napi_env env = v.Env();
  in.ids = nullptr;
  in.n = 0;
  // The typed-array query comes first: it is the fast path's only call, and
  // it fails (napi_invalid_arg) for anything that is not a typed array.
  napi_typedarray_type arrayType;
  size_t n = 0;
  void* data = nullptr;
  if (napi_get_typedarray_info(env, v, &arrayType, &n, &data, nullptr, nullptr) == napi_ok) {
    readTypedIds(v.Env(), arrayType, n, data, in, field);
    return;
  }
  // Statuses matter while a worker is being terminated: every call may fail
  // then, and nothing read from a failed call may be used.
  napi_valuetype type = napi_undefined;
  if (napi_typeof(env, v, &type) != napi_ok)
    throwTypeError(v.Env(), kErrArgType, std::string(field) + " is unreadable");
  if (type == napi_undefined || type == napi_null) return;
  throwTypeError(v.Env(), kErrArgType,
                 std::string(field) + " must be a BigUint64Array, Float64Array, Uint32Array or an array of integers");
}

void JsRouter::readTypedIds(Napi::Env env, napi_typedarray_type arrayType, size_t n, void* data, RouteInput& in,
                            const char* field) {
  if (n > layout::kMaxRequestIds)
    throwRangeError(env, kErrArgValue, std::string(field) + " has more than 16777215 ids");
  switch (arrayType) {
    case napi_biguint64_array:
      in.ids = static_cast<const uint64_t*>(data);  // zero-copy: already u64
      break;
    case napi_float64_array: {
      const double* src = static_cast<const double*>(data);
      idScratch_.resize(n);
      // Validate everything before anything is used, so a bad id at the end
      // leaves the router untouched.
      for (size_t i = 0; i < n; ++i) {
        const double x = src[i];
        if (!(x >= 0 && x <= kMaxSafeInteger) || static_cast<double>(static_cast<uint64_t>(x)) != x) {
          throwRangeError(env, kErrArgValue, elementError(field, i, x));
        }
        idScratch_[i] = static_cast<uint64_t>(x);
      }
      in.ids = idScratch_.data();
      break;
    }
    case napi_uint32_array: {
      const uint32_t* src = static_cast<const uint32_t*>(data);
      idScratch_.assign(src, src + n);
      in.ids = idScratch_.data();
      break;
    }
    default:
      throwTypeError(
          env, kErrArgType,
          std::string(field) + " must be a BigUint64Array, Float64Array, Uint32Array or an array of integers");
  }
  in.n = static_cast<uint32_t>(n);
}

void JsRouter::readRequestOptions(Napi::Env env, double requestBlockTokens, double& blockTokens) {
  if (!(requestBlockTokens >= 1 && requestBlockTokens <= kMaxBlockTokens &&
        requestBlockTokens == std::floor(requestBlockTokens))) {
    throwRangeError(env, kErrArgValue,
                    "blockTokens must be an integer in [1, 16777216], got " + formatNumber(requestBlockTokens));
  }
  blockTokens = requestBlockTokens;
}

void JsRouter::readRequest(const Napi::Value& ids, RouteInput& in) {
  Napi::Env env = ids.Env();
  double defaultTokens;
  napi_typedarray_type arrayType;
  size_t length = 0;
  void* data = nullptr;
  napi_valuetype type = napi_undefined;
  const double kind = request_[layout::kRequestIdsKind];
  // The tokens per block of this request's ids; without one (the common
  // case) one test. The model group is not read here: it is checked against
  // the router's groups under the lock (core/route-call.h).
  const double requestBlockTokens = request_[layout::kRequestBlockTokens];
  double blockTokens = blockTokens_;
  if (!std::isnan(requestBlockTokens)) readRequestOptions(env, requestBlockTokens, blockTokens);
  size_t byteLength = 0;
  if ((kind == layout::kIdsU64 || kind == layout::kIdsF64 || kind == layout::kIdsU32) &&
      napi_get_buffer_info(env, ids, &data, &byteLength) == napi_ok) {
    // The fast path: the caller named the typed array's kind (IDS_* in
    // src/core/core-router.ts), so one query yields its bytes, without the
    // runtime's chain of kind tests. Node answers napi_get_buffer_info for any
    // ArrayBufferView; the count comes from the byte length, so a wrong hint
    // misreads ids but never reads outside the view.
    arrayType = kind == layout::kIdsU64   ? napi_biguint64_array
                : kind == layout::kIdsF64 ? napi_float64_array
                                          : napi_uint32_array;
    const size_t width = kind == layout::kIdsU32 ? 4 : 8;
    if (byteLength % width != 0)
      throwTypeError(env, kErrArgType, "hashIds is not the typed array kind the request names");
    readTypedIds(env, arrayType, byteLength / width, data, in, "hashIds");
    in.blockTokens = blockTokens;
    defaultTokens = static_cast<double>(in.n) * blockTokens;
  } else if (napi_get_typedarray_info(env, ids, &arrayType, &length, &data, nullptr, nullptr) == napi_ok) {
    readTypedIds(env, arrayType, length, data, in, "hashIds");
    in.blockTokens = blockTokens;
    defaultTokens = static_cast<double>(in.n) * blockTokens;
  } else if (napi_typeof(env, ids, &type) == napi_ok && type == napi_string) {
    utf8Into(env, ids, textScratch_);
    const size_t bytes = textScratch_.size();
    const size_t count = promptBlockCount(bytes, static_cast<size_t>(chunkBytes_));
    if (count > layout::kMaxRequestIds)
      throwRangeError(env, kErrArgValue, "prompt is too long: more than 16777215 blocks");
    idScratch_.resize(count);
    hashPromptBlocks(reinterpret_cast<const uint8_t*>(textScratch_.data()), bytes, static_cast<size_t>(chunkBytes_),
                     idScratch_.data());
    in.ids = idScratch_.data();
    in.n = static_cast<uint32_t>(count);
    in.blockTokens = std::isnan(requestBlockTokens) ? chunkBytes_ / kBytesPerToken : blockTokens;
    defaultTokens = std::ceil(static_cast<double>(bytes) / kBytesPerToken);
  } else {
    readIds(ids, in, "hashIds");  // undefined or null (no ids), or the TypeError
    in.blockTokens = blockTokens;
    defaultTokens = 0;
  }
  const double inputTokens = request_[layout::kRequestInputTokens];
  if (std::isnan(inputTokens)) {
    in.inputTokens = defaultTokens;
  } else if (inputTokens >= 0 && inputTokens <= kMaxSafeInteger && inputTokens == std::floor(inputTokens)) {
    in.inputTokens = inputTokens;
  } else {
    throwRangeError(env, kErrArgValue, "inputTokens must be a non-negative integer, got " + formatNumber(inputTokens));
  }
  const double flags = request_[layout::kRequestFlags];
  if (flags == 0) return;  // the common case
  if (!(flags >= 0 && flags <= layout::kFlagsKnown && flags == std::floor(flags))) {
    throwRangeError(env, kErrArgValue, "flags must be an integer in [0, 3], got " + formatNumber(flags));
  }
  const uint32_t bits = static_cast<uint32_t>(flags);
  in.dryRun = (bits & layout::kFlagDryRun) != 0;
  in.tokenKeys = (bits & layout::kFlagTokenKeys) != 0;
}

void JsRouter::readSession(const Napi::Value& session, RouteInput& in) {
  Napi::Env env = session.Env();
  napi_valuetype sessionType = napi_undefined;
  if (napi_typeof(env, session, &sessionType) != napi_ok) throwTypeError(env, kErrArgType, "session is unreadable");
  if (sessionType == napi_string) {
    utf8Into(env, session, textScratch_);
    in.hasSession = true;
    in.sessionKey = xxhash64(reinterpret_cast<const uint8_t*>(textScratch_.data()), textScratch_.size(), 0);
  } else if (sessionType != napi_undefined) {
    throwTypeError(env, kErrArgType, "session must be a string");
  }
}

napi_value JsRouter::route(napi_env rawEnv, napi_value ids, napi_value rawSession) {
  Napi::Env env(rawEnv);
  // The request's keys are read and hashed before the lock, its group checked
  // under it (the order and why: core/route-call.h).
  const RouteOutput out = runRouteCall(
      *shared_, lastOpSeq_, request_[layout::kRequestGroup],
      [&](RouteInput& in) {
        readRequest(Napi::Value(env, ids), in);
        readSession(Napi::Value(env, rawSession), in);
      },
      [&](Router&, const RouteInput& in) {
        Router& router = core();
        if (explainCapacity_ < router.slotCount()) throwRangeError(env, kErrArgValue, "explain buffers are too small");
        const RouteOutput decided = router.route(in, matched_, scores_, terms_);
        writeDecision(router, decided);
        return decided;
      });
  napi_value ticket = nullptr;
  if (napi_create_double(env, out.ticket, &ticket) != napi_ok) return nullptr;  // environment shutting down
  return ticket;
}

void JsRouter::writeDecision(const Router& router, const RouteOutput& out) {
  decision_[layout::kDecisionSlot] = out.slot;
  decision_[layout::kDecisionReason] = static_cast<int32_t>(out.reason);
  const OffloadResult& o = router.lastOffload();
  decision_[layout::kDecisionOffload] = static_cast<int32_t>(o.outcome);
  if (o.outcome == OffloadOutcome::kOff) return;
  decision_[layout::kDecisionPrefillSlot] = o.prefillSlot;
  decision_[layout::kDecisionColdPair] = o.coldPair ? 1 : 0;
  offload_[layout::kOffloadPrefillTicket] = o.prefillTicket;
  offload_[layout::kOffloadInterferenceMs] = o.interferenceMs;
  offload_[layout::kOffloadTransferMs] = o.transferMs;
  offload_[layout::kOffloadExtraPrefillMs] = o.extraPrefillMs;
}

Napi::Value JsRouter::Match(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  try {
    runRouteCall(
        *shared_, lastOpSeq_, request_[layout::kRequestGroup], [&](RouteInput& in) { readRequest(info[0], in); },
        [&](Router&, const RouteInput& in) {
          Router& router = core();
          if (explainCapacity_ < router.slotCount())
            throwRangeError(env, kErrArgValue, "explain buffers are too small");
          router.matchRequest(in, matched_);
          return 0;
        });
  } catch (const RequestRangeError& error) {
    throw requestError(env, error);
  }
  return env.Undefined();
}

}  // namespace kvroute
