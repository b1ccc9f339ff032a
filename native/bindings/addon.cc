// addon — registers kvroute's bindings and nothing else.
//
// Node-API addons are context-aware: nothing here is process-global, so the
// addon loads in the main thread and in any number of worker threads, and each
// environment's objects are finalized when that environment tears down.
#include <napi.h>

#include "bindings/js-hash.h"
#include "bindings/js-layout.h"
#include "bindings/js-memory.h"
#include "bindings/js-otlp-spans.h"
#include "bindings/js-prefix-trie.h"
#include "bindings/js-request-scan.h"
#include "bindings/js-router.h"
#include "bindings/js-shm-feed.h"
#include "core/policy.h"

namespace kvroute {

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("NativeRouter", JsRouter::Define(env));
  exports.Set("FeedWriter", JsFeedWriter::Define(env));
  exports.Set("FeedReader", JsFeedReader::Define(env));
  exports.Set("RequestScanner", JsRequestScanner::Define(env));
  exports.Set("PrefixTrie", JsPrefixTrie::Define(env));
  exports.Set("OtlpSpanWriter", JsOtlpSpanWriter::Define(env));
  exports.Set("scanKernel", Napi::String::New(env, scanKernel()));
  exports.Set("hashPrompt", Napi::Function::New(env, JsHashPrompt, "hashPrompt"));
  exports.Set("xxhash64", Napi::Function::New(env, JsXxHash64, "xxhash64"));
  exports.Set("hashTokenBlocks", Napi::Function::New(env, JsHashTokenBlocks, "hashTokenBlocks"));
  exports.Set("reasonCount", Napi::Number::New(env, kReasonCount));
  exports.Set("policyKindCount", Napi::Number::New(env, kPolicyKindCount));
  exports.Set("offloadOutcomeCount", Napi::Number::New(env, kOffloadOutcomeCount));
  exports.Set("layout", layout::layoutObject(env));
  exports.Set("trimHeap", Napi::Function::New(env, JsTrimHeap, "trimHeap"));
  return exports;
}

}  // namespace kvroute

// NODE_API_MODULE pastes the function name into identifiers, so it needs an
// unqualified name at global scope.
static Napi::Object InitKvroute(Napi::Env env, Napi::Object exports) { return kvroute::Init(env, exports); }

NODE_API_MODULE(kvroute, InitKvroute)
