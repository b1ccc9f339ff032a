// js-router — NativeRouter's lifecycle (the method table, construction from
// config and buffers, the bound route() function's handle), the shared core's
// lock, and the ticket queue: JavaScript appends first-token/complete/abort
// events to a Float64Array that every call drains first (core()), and the
// ticket calls that apply one event at once. The other methods live in
// js-router-{policy,fleet,route,stats,events}.cc.
#include "bindings/js-router.h"

#include "bindings/napi-util.h"

namespace kvroute {

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
                         InstanceMethod("setInstanceCosts", &JsRouter::SetInstanceCosts),
                         InstanceMethod("setReturningTokens", &JsRouter::SetReturningTokens),
                         InstanceMethod("setPeerLoad", &JsRouter::SetPeerLoad),
                         InstanceMethod("pinSession", &JsRouter::PinSession),
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

  request_ =
      typedArrayData<double>(buffers.Get("request"), napi_float64_array, layout::kRequestFields, "buffers.request");
  decision_ =
      typedArrayData<int32_t>(buffers.Get("decision"), napi_int32_array, layout::kDecisionFields, "buffers.decision");
  offload_ =
      typedArrayData<double>(buffers.Get("offload"), napi_float64_array, layout::kOffloadFields, "buffers.offload");
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

Router& JsRouter::core() {
  const double queued = events_[0];
  if (queued != 0) {
    // A count the queue cannot hold means the caller wrote garbage: drop it
    // rather than read past the buffer.
    const size_t n = queued > 0 && queued <= static_cast<double>(eventCapacity_) ? static_cast<size_t>(queued) : 0;
    for (size_t k = 0; k < n; ++k) {
      const double kind = events_[2 + 2 * k];
      const TicketEvent event = kind == layout::kEventFirstToken ? TicketEvent::kFirstToken
                                : kind == layout::kEventAbort    ? TicketEvent::kAbort
                                                                 : TicketEvent::kComplete;
      router_->onTicket(events_[1 + 2 * k], event);
    }
    events_[0] = 0;
  }
  return *router_;
}

std::unique_lock<std::mutex> JsRouter::exclusive() { return shared_->exclusive(lastOpSeq_); }

Napi::Value JsRouter::ShareCore(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), shareCore(shared_));
}

Napi::Value JsRouter::LockStats(const Napi::CallbackInfo& info) {
  double* out = typedArrayData<double>(info[0], napi_float64_array, layout::kLockStatFields, "lockStats");
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

Napi::Value JsRouter::onTicket(const Napi::CallbackInfo& info, TicketEvent event) {
  const auto lock = exclusive();
  const double ticket = requireNumber(info[0], "ticket");
  return Napi::Boolean::New(info.Env(), core().onTicket(ticket, event));
}

Napi::Value JsRouter::FirstToken(const Napi::CallbackInfo& info) { return onTicket(info, TicketEvent::kFirstToken); }
Napi::Value JsRouter::Complete(const Napi::CallbackInfo& info) { return onTicket(info, TicketEvent::kComplete); }
Napi::Value JsRouter::Abort(const Napi::CallbackInfo& info) { return onTicket(info, TicketEvent::kAbort); }

}  // namespace kvroute
