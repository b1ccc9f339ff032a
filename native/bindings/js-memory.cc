// js-memory — see js-memory.h.
#include "bindings/js-memory.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kvroute {

namespace {

// Execute runs on the threadpool and touches no JS; OnOK resolves on the JS thread.
class TrimWorker : public Napi::AsyncWorker {
 public:
  TrimWorker(Napi::Env env, Napi::Promise::Deferred deferred) : Napi::AsyncWorker(env), deferred_(deferred) {}

  void Execute() override {
#if defined(__GLIBC__)
    released_ = malloc_trim(0) != 0;
#endif
  }

  void OnOK() override { deferred_.Resolve(Napi::Boolean::New(Env(), released_)); }
  void OnError(const Napi::Error& error) override { deferred_.Reject(error.Value()); }

 private:
  Napi::Promise::Deferred deferred_;
  bool released_ = false;
};

}  // namespace

Napi::Value JsTrimHeap(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto deferred = Napi::Promise::Deferred::New(env);
#if defined(__GLIBC__)
  auto* worker = new TrimWorker(env, deferred);
  worker->Queue();  // the worker deletes itself after OnOK / OnError
#else
  deferred.Resolve(Napi::Boolean::New(env, false));
#endif
  return deferred.Promise();
}

}  // namespace kvroute
