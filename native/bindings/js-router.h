// js-router — the JavaScript face of kvroute::Router (class NativeRouter).
//
// One synchronous call per request: route(ids, session) reads its numeric
// arguments from a caller-owned Float64Array, writes the decision into
// caller-owned typed arrays, and returns the ticket. No JS objects are built
// per request. src/core/native.ts declares this surface; the TypeScript
// reference (src/core/reference/) implements the same one.
//
// One class, its methods in files by concern: js-router.cc (lifecycle, the
// shared core's lock, the ticket queue), js-router-policy.cc (policy config,
// clock), js-router-fleet.cc (instances, blocks, observed state),
// js-router-route.cc (route and match, the hot path), js-router-stats.cc
// (reports), js-router-events.cc (KV events); js-router-limits.h holds the
// argument limits they share.
#pragma once

#include <napi.h>

#include <vector>

#include "bindings/js-layout.h"
#include "core/router.h"
#include "core/shared-core.h"

namespace kvroute {

class JsRouter : public Napi::ObjectWrap<JsRouter> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit JsRouter(const Napi::CallbackInfo& info);
  ~JsRouter() override;

 private:
  // The typed-array layouts (request slab, decision, offload, event queue,
  // stats) are layout::k* in js-layout.h, checked against TypeScript at load.
  Napi::Value AddInstance(const Napi::CallbackInfo& info);
  Napi::Value DrainInstance(const Napi::CallbackInfo& info);
  Napi::Value RemoveInstance(const Napi::CallbackInfo& info);
  Napi::Value SetInstanceGroups(const Napi::CallbackInfo& info);
  Napi::Value SetExplainBuffers(const Napi::CallbackInfo& info);
  // route(ids, session) is not a prototype method: the constructor binds a
  // plain Node-API function to each router as an own property. An
  // ObjectWrap method pays for a CallbackInfo and an unwrap (a private-symbol
  // lookup) on every call, about half of an empty route() from JavaScript.
  // The function reaches the router through a RouteHandle that the router
  // clears when it is finalized, so a function kept longer throws instead of
  // touching freed memory.
  struct RouteHandle {
    JsRouter* router;
    int owners;  // the router and the function; the last to go deletes it
  };
  static napi_value RouteCallback(napi_env env, napi_callback_info info);
  static void ReleaseHandle(RouteHandle* handle);
  napi_value route(napi_env env, napi_value ids, napi_value session);
  Napi::Value Match(const Napi::CallbackInfo& info);
  Napi::Value FirstToken(const Napi::CallbackInfo& info);
  Napi::Value Complete(const Napi::CallbackInfo& info);
  Napi::Value Abort(const Napi::CallbackInfo& info);
  Napi::Value SetObserved(const Napi::CallbackInfo& info);
  Napi::Value SetInstanceCosts(const Napi::CallbackInfo& info);
  Napi::Value SetReturningTokens(const Napi::CallbackInfo& info);
  Napi::Value SetPeerLoad(const Napi::CallbackInfo& info);
  Napi::Value PinSession(const Napi::CallbackInfo& info);
  Napi::Value SetTime(const Napi::CallbackInfo& info);
  Napi::Value SetPolicy(const Napi::CallbackInfo& info);
  Napi::Value Stats(const Napi::CallbackInfo& info);
  Napi::Value RemoveBlocks(const Napi::CallbackInfo& info);
  Napi::Value ClearBlocks(const Napi::CallbackInfo& info);
  Napi::Value SetCapacity(const Napi::CallbackInfo& info);
  Napi::Value ReasonCounts(const Napi::CallbackInfo& info);
  Napi::Value Counts(const Napi::CallbackInfo& info);
  Napi::Value CheckInvariants(const Napi::CallbackInfo& info);
  Napi::Value SetEventFed(const Napi::CallbackInfo& info);
  // applyKvEvents(slot, packed): validates the whole packed stream (every
  // length against its array, every record against the lengths) before
  // applying any of it, so bad input throws and changes nothing.
  Napi::Value ApplyKvEvents(const Napi::CallbackInfo& info);
  Napi::Value ClearKvEvents(const Napi::CallbackInfo& info);
  Napi::Value EventStats(const Napi::CallbackInfo& info);
  // shareCore(): publishes this router's core for other threads (shared-core.h)
  // and returns its handle; `new NativeRouter({ attach: handle }, buffers)` on
  // another thread routes with the same core.
  Napi::Value ShareCore(const Napi::CallbackInfo& info);
  // lockStats(out): applies the queued ticket events, then writes [the number
  // of this wrapper's previous locked call, this call's number (the one the
  // queued events were applied at), the core's locked calls, those that found
  // the lock taken]; zeros while not shared.
  Napi::Value LockStats(const Napi::CallbackInfo& info);

  // Takes the shared core's mutex when it is shared (else an empty lock) and
  // numbers the call; every method's first statement. Not re-entrant.
  std::unique_lock<std::mutex> exclusive();

  uint32_t requireSlot(const Napi::Value& v);
  // Applies and clears the queued ticket events; returns the router.
  Router& core();
  Napi::Value DrainEvents(const Napi::CallbackInfo& info);
  Napi::Value FeedStatus(const Napi::CallbackInfo& info);
  // Resolves the ids argument (typed array, prompt string or undefined) into
  // `in.ids`/`in.n`, filling defaults for the token fields. Thread-private: it
  // reads nothing of the router (its group is bound under the lock).
  void readRequest(const Napi::Value& ids, RouteInput& in);
  // Checks the slab's blockTokens (when it is not the default) into `blockTokens`.
  void readRequestOptions(Napi::Env env, double requestBlockTokens, double& blockTokens);
  // The session argument (a string or undefined) into in.hasSession/sessionKey.
  void readSession(const Napi::Value& session, RouteInput& in);
  // route()'s decision into the caller's decision and offload slabs.
  void writeDecision(const Router& router, const RouteOutput& out);
  void readIds(const Napi::Value& ids, RouteInput& in, const char* field);
  void readTypedIds(Napi::Env env, napi_typedarray_type type, size_t n, void* data, RouteInput& in, const char* field);
  Napi::Value onTicket(const Napi::CallbackInfo& info, TicketEvent event);

  std::shared_ptr<SharedCore> shared_;
  Router* router_ = nullptr;  // &shared_->router
  uint64_t lastOpSeq_ = 0;
  RouteHandle* routeHandle_ = nullptr;
  double chunkBytes_ = 128;
  double blockTokens_ = 16;
  Napi::Reference<Napi::Float64Array> requestRef_;
  Napi::Reference<Napi::Float64Array> eventsRef_;
  double* events_ = nullptr;
  size_t eventCapacity_ = 0;
  Napi::Reference<Napi::Int32Array> decisionRef_;
  Napi::Reference<Napi::Float64Array> offloadRef_;
  Napi::Reference<Napi::Int32Array> matchedRef_;
  Napi::Reference<Napi::Float64Array> scoresRef_;
  double* request_ = nullptr;
  int32_t* decision_ = nullptr;
  double* offload_ = nullptr;
  int32_t* matched_ = nullptr;
  double* scores_ = nullptr;
  Napi::Reference<Napi::Float64Array> termsRef_;
  double* terms_ = nullptr;  // optional: kTermCount per slot
  size_t explainCapacity_ = 0;
  std::vector<uint64_t> idScratch_;
  std::vector<char> textScratch_;
};

// Reads a policy description object into a PolicyConfig (shared by the
// constructor and setPolicy).
PolicyConfig readPolicy(const Napi::Object& spec);

}  // namespace kvroute
