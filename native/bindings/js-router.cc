#include "bindings/js-router.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "bindings/napi-util.h"
#include "core/block-index.h"
#include "hash/prompt-hash.h"
#include "util/xxhash64.h"

namespace kvroute {
namespace {

constexpr double kMaxSafeInteger = 9007199254740991.0;  // 2^53 - 1
// A request's ids become depths in a 24-bit field (BlockIndex::kMaxDepth).
constexpr size_t kMaxIds = BlockIndex::kMaxDepth;
constexpr double kBytesPerToken = 4;  // prompt-text requests: token estimate
constexpr double kMaxBlockTokens = 1 << 24;

std::string elementError(const char* field, size_t i, double x) {
  return std::string(field) + "[" + std::to_string(i) + "] must be an integer in [0, 2^53), got " + formatNumber(x);
}

// policy.offload: null (no layer) or every OffloadCostModel field, checked by
// resolveOffloadCost in TypeScript first; this re-check only keeps garbage out.
void readOffload(const Napi::Value& v, PolicyConfig& p) {
  p.offload = false;
  if (v.IsNull() || v.IsUndefined()) return;
  if (!v.IsObject()) throwTypeError(v.Env(), kErrArgType, "policy.offload must be null or an object");
  const Napi::Object o = v.As<Napi::Object>();
  constexpr double kMax = std::numeric_limits<double>::max();
  const auto field = [&](const char* name, bool positive) {
    const std::string path = std::string("policy.offload.") + name;
    const double x = requireInRange(o.Get(name), path.c_str(), 0, kMax);
    if (positive && !(x > 0)) throwRangeError(v.Env(), kErrArgValue, path + " must be > 0");
    return x;
  };
  OffloadCostModel& m = p.offloadCost;
  m.thresholdTokens = field("thresholdTokens", false);
  m.linkGbps = field("linkGbps", true);
  m.warmOverheadMs = field("warmOverheadMs", false);
  m.coldPenaltyMs = field("coldPenaltyMs", false);
  if (!o.Get("layerwise").IsBoolean())
    throwTypeError(v.Env(), kErrArgType, "policy.offload.layerwise must be a boolean");
  m.layerwise = o.Get("layerwise").As<Napi::Boolean>().Value();
  m.layers = field("layers", true);
  m.kvBytesPerToken = field("kvBytesPerToken", true);
  m.stepOverheadMs = field("stepOverheadMs", false);
  m.prefillMsPerToken = field("prefillMsPerToken", false);
  m.attentionMsPerToken2 = field("attentionMsPerToken2", false);
  m.chunkTokens = field("chunkTokens", true);
  if (!o.Get("chargePrefill").IsBoolean())
    throwTypeError(v.Env(), kErrArgType, "policy.offload.chargePrefill must be a boolean");
  m.chargePrefill = o.Get("chargePrefill").As<Napi::Boolean>().Value();
  p.offload = true;
}

}  // namespace

PolicyConfig readPolicy(const Napi::Object& spec) {
  PolicyConfig p;
  const double kind = requireInteger(spec.Get("kind"), "policy.kind", 0, kPolicyKindCount - 1);
  p.kind = static_cast<PolicyKind>(static_cast<int32_t>(kind));
  p.affinityThreshold = requireInRange(spec.Get("affinityThreshold"), "policy.affinityThreshold", 0, 1);
  p.overloadFactor = requireInRange(spec.Get("overloadFactor"), "policy.overloadFactor", 0, 1e9);
  p.decodeWeight = requireInRange(spec.Get("decodeWeight"), "policy.decodeWeight", 0, 1);
  p.ringVnodes = static_cast<uint32_t>(requireInteger(spec.Get("ringVnodes"), "policy.ringVnodes", 1, 65536));
  p.batchWeight = requireInRange(spec.Get("batchWeight"), "policy.batchWeight", 0, 1e3);
  p.attentionWeight = requireInRange(spec.Get("attentionWeight"), "policy.attentionWeight", 0, 1);
  p.affinitySlack = requireInRange(spec.Get("affinitySlack"), "policy.affinitySlack", 0, 1e3);
  p.tieTolerance = requireInRange(spec.Get("tieTolerance"), "policy.tieTolerance", 0, 1);
  p.kvWeight = requireInRange(spec.Get("kvWeight"), "policy.kvWeight", 0, 1e3);
  p.kvThreshold = requireInRange(spec.Get("kvThreshold"), "policy.kvThreshold", 0, 10);
  p.ringFirstTurn = requireInteger(spec.Get("ringFirstTurn"), "policy.ringFirstTurn", 0, 1) == 1;
  readOffload(spec.Get("offload"), p);
  return p;
}

Napi::Function JsRouter::Define(Napi::Env env) {
  return DefineClass(env, "NativeRouter",
                     {
                         InstanceMethod("addInstance", &JsRouter::AddInstance),
                         InstanceMethod("drainInstance", &JsRouter::DrainInstance),
                         InstanceMethod("removeInstance", &JsRouter::RemoveInstance),
                         InstanceMethod("setInstanceGroups", &JsRouter::SetInstanceGroups),
                         InstanceMethod("setExplainBuffers", &JsRouter::SetExplainBuffers),
                         InstanceMethod("match", &JsRouter::Match),
                         InstanceMethod("firstToken", &JsRouter::FirstToken),
                         InstanceMethod("complete", &JsRouter::Complete),
                         InstanceMethod("abort", &JsRouter::Abort),
                         InstanceMethod("setObserved", &JsRouter::SetObserved),
                         InstanceMethod("setTime", &JsRouter::SetTime),
                         InstanceMethod("setPolicy", &JsRouter::SetPolicy),
                         InstanceMethod("stats", &JsRouter::Stats),
                         InstanceMethod("removeBlocks", &JsRouter::RemoveBlocks),
                         InstanceMethod("clearBlocks", &JsRouter::ClearBlocks),
                         InstanceMethod("setCapacity", &JsRouter::SetCapacity),
                         InstanceMethod("reasonCounts", &JsRouter::ReasonCounts),
                         InstanceMethod("counts", &JsRouter::Counts),
                         InstanceMethod("checkInvariants", &JsRouter::CheckInvariants),
                         InstanceMethod("drainEvents", &JsRouter::DrainEvents),
                         InstanceMethod("feedStatus", &JsRouter::FeedStatus),
                         InstanceMethod("setEventFed", &JsRouter::SetEventFed),
                         InstanceMethod("applyKvEvents", &JsRouter::ApplyKvEvents),
                         InstanceMethod("clearKvEvents", &JsRouter::ClearKvEvents),
                         InstanceMethod("eventStats", &JsRouter::EventStats),
                         InstanceMethod("shareCore", &JsRouter::ShareCore),
                         InstanceMethod("lockStats", &JsRouter::LockStats),
                     });
}

JsRouter::JsRouter(const Napi::CallbackInfo& info) : Napi::ObjectWrap<JsRouter>(info) {
  Napi::Env env = info.Env();
  if (!info[0].IsObject() || !info[1].IsObject()) {
    throwTypeError(env, kErrArgType, "NativeRouter(config, buffers) needs two objects");
  }
  Napi::Object config = info[0].As<Napi::Object>();
  Napi::Object buffers = info[1].As<Napi::Object>();
  if (!config.Get("policy").IsObject()) throwTypeError(env, kErrArgType, "config.policy must be an object");

  RouterConfig rc;
  rc.policy = readPolicy(config.Get("policy").As<Napi::Object>());
  rc.blockTokens = requireInteger(config.Get("blockTokens"), "blockSize", 1, 1 << 24);
  rc.stalenessMs = requireInRange(config.Get("stalenessMs"), "stalenessMs", 0, 1e12);
  rc.maxSessions = static_cast<uint32_t>(requireInteger(config.Get("maxSessions"), "maxSessions", 1, 4294967295.0));
  rc.manualClock = config.Get("manualClock").ToBoolean().Value();
  if (config.Get("feedPath").IsString()) rc.feedPath = config.Get("feedPath").As<Napi::String>().Utf8Value();
  chunkBytes_ = requireInteger(config.Get("chunkBytes"), "hashChunkBytes", 1, 1 << 24);
  blockTokens_ = rc.blockTokens;

  request_ = typedArrayData<double>(buffers.Get("request"), napi_float64_array, kRequestFields, "buffers.request");
  decision_ = typedArrayData<int32_t>(buffers.Get("decision"), napi_int32_array, kDecisionFields, "buffers.decision");
  offload_ = typedArrayData<double>(buffers.Get("offload"), napi_float64_array, kOffloadFields, "buffers.offload");
  events_ = typedArrayData<double>(buffers.Get("events"), napi_float64_array, 3, "buffers.events");
  eventCapacity_ = (buffers.Get("events").As<Napi::Float64Array>().ElementLength() - 1) / 2;
  events_[0] = 0;
  requestRef_ = Napi::Persistent(buffers.Get("request").As<Napi::Float64Array>());
  eventsRef_ = Napi::Persistent(buffers.Get("events").As<Napi::Float64Array>());
  decisionRef_ = Napi::Persistent(buffers.Get("decision").As<Napi::Int32Array>());
  offloadRef_ = Napi::Persistent(buffers.Get("offload").As<Napi::Float64Array>());
  if (config.Get("attach").IsNumber()) {
    const double handle = requireInteger(config.Get("attach"), "attach", 1, 4294967295.0);
    shared_ = attachSharedCore(static_cast<uint32_t>(handle));
    if (shared_ == nullptr)
      throwRangeError(env, kErrArgValue, "attach: no shared router core " + formatNumber(handle) + " in this process");
    chunkBytes_ = shared_->chunkBytes;
    blockTokens_ = shared_->blockTokens;
  } else {
    shared_ = std::make_shared<SharedCore>(rc, chunkBytes_);
  }
  router_ = &shared_->router;

  routeHandle_ = new RouteHandle{this, 2};
  napi_value route = nullptr;
  if (napi_create_function(env, "route", NAPI_AUTO_LENGTH, &JsRouter::RouteCallback, routeHandle_, &route) != napi_ok ||
      napi_add_finalizer(
          env, route, routeHandle_, [](napi_env, void* data, void*) { ReleaseHandle(static_cast<RouteHandle*>(data)); },
          nullptr, nullptr) != napi_ok) {
    // The function never came to own the handle: the router is its only owner.
    routeHandle_->owners = 1;
    throw Napi::Error::New(env, "cannot create route()");
  }
  info.This().As<Napi::Object>().Set("route", Napi::Value(env, route));
}

JsRouter::~JsRouter() {
  if (routeHandle_ == nullptr) return;
  routeHandle_->router = nullptr;
  ReleaseHandle(routeHandle_);
}

void JsRouter::ReleaseHandle(RouteHandle* handle) {
  if (--handle->owners == 0) delete handle;
}

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
  } catch (const std::exception& error) {
    Napi::Error::New(env, error.what()).ThrowAsJavaScriptException();
  } catch (...) {
    Napi::Error::New(env, "a native exception was thrown").ThrowAsJavaScriptException();
  }
  return nullptr;
}

Router& JsRouter::core() {
  const double queued = events_[0];
  if (queued != 0) {
    // A count the queue cannot hold means the caller wrote garbage: drop it
    // rather than read past the buffer.
    const size_t n = queued > 0 && queued <= static_cast<double>(eventCapacity_) ? static_cast<size_t>(queued) : 0;
    for (size_t k = 0; k < n; ++k) {
      const double kind = events_[2 + 2 * k];
      const TicketEvent event = kind == kEventFirstToken ? TicketEvent::kFirstToken
                                : kind == kEventAbort    ? TicketEvent::kAbort
                                                         : TicketEvent::kComplete;
      router_->onTicket(events_[1 + 2 * k], event);
    }
    events_[0] = 0;
  }
  return *router_;
}

std::unique_lock<std::mutex> JsRouter::exclusive() {
  if (!shared_->locking.load(std::memory_order_acquire)) return {};
  std::unique_lock<std::mutex> lock(shared_->mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    lock.lock();
    ++shared_->contended;
  }
  lastOpSeq_ = ++shared_->ops;
  return lock;
}

Napi::Value JsRouter::ShareCore(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), shareCore(shared_));
}

Napi::Value JsRouter::LockStats(const Napi::CallbackInfo& info) {
  double* out = typedArrayData<double>(info[0], napi_float64_array, 4, "lockStats");
  const uint64_t previous = lastOpSeq_;  // before this call takes a number of its own
  const auto lock = exclusive();
  core();  // applies the queued ticket events, at this call's number
  out[0] = static_cast<double>(previous);
  out[1] = static_cast<double>(lastOpSeq_);
  out[2] = static_cast<double>(shared_->ops);
  out[3] = static_cast<double>(shared_->contended);
  return info.Env().Undefined();
}

Napi::Value JsRouter::DrainEvents(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  core();
  return info.Env().Undefined();
}

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
  if (n > kMaxIds) throwRangeError(env, kErrArgValue, std::string(field) + " has more than 16777215 ids");
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

void JsRouter::readRequestOptions(Napi::Env env, double group, double requestBlockTokens, RouteInput& in,
                                  double& blockTokens) {
  if (!std::isnan(requestBlockTokens)) {
    if (!(requestBlockTokens >= 1 && requestBlockTokens <= kMaxBlockTokens &&
          requestBlockTokens == std::floor(requestBlockTokens))) {
      throwRangeError(env, kErrArgValue,
                      "blockTokens must be an integer in [1, 16777216], got " + formatNumber(requestBlockTokens));
    }
    blockTokens = requestBlockTokens;
  }
  if (group == -1) return;
  if (!(group >= 0 && group < static_cast<double>(router_->groupCount()) && group == std::floor(group))) {
    throwRangeError(env, kErrArgValue,
                    "group must be -1 or a known group id below " + std::to_string(router_->groupCount()) + ", got " +
                        formatNumber(group));
  }
  in.group = static_cast<int32_t>(group);
}

void JsRouter::readRequest(const Napi::Value& ids, RouteInput& in) {
  Napi::Env env = ids.Env();
  double defaultTokens;
  napi_typedarray_type arrayType;
  size_t length = 0;
  void* data = nullptr;
  napi_valuetype type = napi_undefined;
  const double kind = request_[kRequestIdsKind];
  // The model group and tokens per block of this request's ids; without
  // either (the common case) one test.
  const double requestBlockTokens = request_[kRequestBlockTokens];
  const double group = request_[kRequestGroup];
  double blockTokens = blockTokens_;
  in.group = -1;
  if (group != -1 || !std::isnan(requestBlockTokens))
    readRequestOptions(env, group, requestBlockTokens, in, blockTokens);
  size_t byteLength = 0;
  if ((kind == 1 || kind == 2 || kind == 3) && napi_get_buffer_info(env, ids, &data, &byteLength) == napi_ok) {
    // The fast path: the caller named the typed array's kind (IDS_* in
    // src/core/core-router.ts), so one query yields its bytes, without the
    // runtime's chain of kind tests. Node answers napi_get_buffer_info for any
    // ArrayBufferView; the count comes from the byte length, so a wrong hint
    // misreads ids but never reads outside the view.
    arrayType = kind == 1 ? napi_biguint64_array : kind == 2 ? napi_float64_array : napi_uint32_array;
    const size_t width = kind == 3 ? 4 : 8;
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
    if (count > kMaxIds) throwRangeError(env, kErrArgValue, "prompt is too long: more than 16777215 blocks");
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
  const double inputTokens = request_[kRequestInputTokens];
  if (std::isnan(inputTokens)) {
    in.inputTokens = defaultTokens;
  } else if (inputTokens >= 0 && inputTokens <= kMaxSafeInteger && inputTokens == std::floor(inputTokens)) {
    in.inputTokens = inputTokens;
  } else {
    throwRangeError(env, kErrArgValue, "inputTokens must be a non-negative integer, got " + formatNumber(inputTokens));
  }
  const double flags = request_[kRequestFlags];
  if (flags == 0) return;  // the common case
  if (!(flags >= 0 && flags <= kFlagsKnown && flags == std::floor(flags))) {
    throwRangeError(env, kErrArgValue, "flags must be an integer in [0, 3], got " + formatNumber(flags));
  }
  const uint32_t bits = static_cast<uint32_t>(flags);
  in.dryRun = (bits & kFlagDryRun) != 0;
  in.tokenKeys = (bits & kFlagTokenKeys) != 0;
}

napi_value JsRouter::route(napi_env rawEnv, napi_value ids, napi_value rawSession) {
  Napi::Env env(rawEnv);
  // The request's keys are read and hashed before the lock: they touch only
  // this wrapper's slabs and scratch, and a long prompt's hashing would
  // otherwise hold every other thread's route.
  RouteInput in;
  readRequest(Napi::Value(env, ids), in);
  const Napi::Value session(env, rawSession);
  napi_valuetype sessionType = napi_undefined;
  if (napi_typeof(env, session, &sessionType) != napi_ok) throwTypeError(env, kErrArgType, "session is unreadable");
  if (sessionType == napi_string) {
    utf8Into(env, session, textScratch_);
    in.hasSession = true;
    in.sessionKey = xxhash64(reinterpret_cast<const uint8_t*>(textScratch_.data()), textScratch_.size(), 0);
  } else if (sessionType != napi_undefined) {
    throwTypeError(env, kErrArgType, "session must be a string");
  }
  const auto lock = exclusive();
  Router& router = core();
  if (explainCapacity_ < router.slotCount()) throwRangeError(env, kErrArgValue, "explain buffers are too small");
  const RouteOutput out = router.route(in, matched_, scores_, terms_);
  decision_[0] = out.slot;
  decision_[1] = static_cast<int32_t>(out.reason);
  const OffloadResult& o = router.lastOffload();
  decision_[2] = static_cast<int32_t>(o.outcome);
  if (o.outcome != OffloadOutcome::kOff) {
    decision_[3] = o.prefillSlot;
    decision_[4] = o.coldPair ? 1 : 0;
    offload_[0] = o.prefillTicket;
    offload_[1] = o.interferenceMs;
    offload_[2] = o.transferMs;
    offload_[3] = o.extraPrefillMs;
  }
  napi_value ticket = nullptr;
  if (napi_create_double(env, out.ticket, &ticket) != napi_ok) return nullptr;  // environment shutting down
  return ticket;
}

Napi::Value JsRouter::Match(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  Napi::Env env = info.Env();
  if (explainCapacity_ < core().slotCount()) throwRangeError(env, kErrArgValue, "explain buffers are too small");
  RouteInput in;
  readRequest(info[0], in);
  core().matchRequest(in, matched_);
  return env.Undefined();
}

Napi::Value JsRouter::onTicket(const Napi::CallbackInfo& info, TicketEvent event) {
  const auto lock = exclusive();
  const double ticket = requireNumber(info[0], "ticket");
  return Napi::Boolean::New(info.Env(), core().onTicket(ticket, event));
}

Napi::Value JsRouter::FirstToken(const Napi::CallbackInfo& info) { return onTicket(info, TicketEvent::kFirstToken); }
Napi::Value JsRouter::Complete(const Napi::CallbackInfo& info) { return onTicket(info, TicketEvent::kComplete); }
Napi::Value JsRouter::Abort(const Napi::CallbackInfo& info) { return onTicket(info, TicketEvent::kAbort); }

Napi::Value JsRouter::SetObserved(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  ObservedState o;
  if (!info[1].IsNull() && !info[1].IsUndefined()) {
    const double* f = typedArrayData<double>(info[1], napi_float64_array, kObservedFields, "observed");
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

Napi::Value JsRouter::SetTime(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  core().setTime(requireInRange(info[0], "nowMs", -1e15, 1e15));
  return info.Env().Undefined();
}

Napi::Value JsRouter::SetPolicy(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  if (!info[0].IsObject()) throwTypeError(info.Env(), kErrArgType, "policy must be an object");
  core().setPolicy(readPolicy(info[0].As<Napi::Object>()));
  return info.Env().Undefined();
}

Napi::Value JsRouter::Stats(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  const uint32_t slot = requireSlot(info[0]);
  double* out = typedArrayData<double>(info[1], napi_float64_array, kStatsFields, "stats");
  const InstanceStats s = core().stats(slot);
  const double fields[kStatsFields] = {
      static_cast<double>(s.capacityBlocks),
      static_cast<double>(s.blocks),
      static_cast<double>(s.segments),
      static_cast<double>(s.bytes),
      static_cast<double>(s.shadow.running),
      static_cast<double>(s.shadow.waiting),
      static_cast<double>(s.shadow.prefillTokens),
      static_cast<double>(s.shadow.activeBlocks),
      s.effective.running,
      s.effective.waiting,
      s.effective.pendingPrefill,
      s.effective.decodeBatch,
      s.effective.kvUsage,
      s.observedFresh ? 1.0 : 0.0,
      static_cast<double>(s.routed),
      static_cast<double>(s.completed),
      static_cast<double>(s.aborted),
      core().isDrained(slot) ? 1.0 : 0.0,
      s.effective.numRequests,
  };
  std::copy(fields, fields + kStatsFields, out);
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

Napi::Value JsRouter::ReasonCounts(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  double* out = typedArrayData<double>(info[0], napi_float64_array, kReasonCount, "reasonCounts");
  const auto& counts = core().reasonCounts();
  for (size_t r = 0; r < counts.size(); ++r) out[r] = static_cast<double>(counts[r]);
  return info.Env().Undefined();
}

Napi::Value JsRouter::Counts(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  double* out = typedArrayData<double>(info[0], napi_float64_array, 4, "counts");
  out[0] = static_cast<double>(core().openTickets());
  out[1] = static_cast<double>(core().sessionCount());
  out[2] = static_cast<double>(core().slotCount());
  out[3] = static_cast<double>(core().fleetBytes());
  return info.Env().Undefined();
}

Napi::Value JsRouter::CheckInvariants(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  return Napi::String::New(info.Env(), core().checkInvariants());
}

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
  double* out = typedArrayData<double>(info[1], napi_float64_array, kEventStatsFields, "eventStats");
  const EventIndex& events = core().events();
  const EventCounters& c = events.counters(slot);
  const double fields[kEventStatsFields] = {
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
  std::copy(fields, fields + kEventStatsFields, out);
  return info.Env().Undefined();
}

// feedStatus() -> -1 without a feed, else shm::FeedStatus
Napi::Value JsRouter::FeedStatus(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  return Napi::Number::New(info.Env(), router_->feedStatus());
}

}  // namespace kvroute
