#include "bindings/js-prefix-trie.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bindings/napi-util.h"

namespace kvroute {
namespace {

constexpr double kMaxSafeInteger = 9007199254740991.0;  // 2^53 - 1
constexpr double kMaxSession = 4294967295.0;            // a path record's header is uint32

bool isSafeInteger(double x) { return x >= -kMaxSafeInteger && x <= kMaxSafeInteger && x == std::trunc(x); }

// A safe integer's 64-bit pattern (two's complement): one key per id, as the
// TypeScript trie's exact (low, high) split.
uint64_t idKey(double x) { return static_cast<uint64_t>(static_cast<int64_t>(x)); }

[[noreturn]] void badId(Napi::Env env, const char* field, size_t i, double x) {
  throwRangeError(env, kErrArgValue,
                  std::string(field) + "[" + std::to_string(i) + "] must be a safe integer (|id| <= 2^53 - 1), got " +
                      formatNumber(x));
}

void requireLength(Napi::Env env, const char* field, size_t has, size_t needs) {
  if (has < needs) {
    throwRangeError(
        env, kErrArgValue,
        std::string(field) + " is too short: needs " + std::to_string(needs) + " entries, has " + std::to_string(has));
  }
}

}  // namespace

Napi::Function JsPrefixTrie::Define(Napi::Env env) {
  return DefineClass(env, "PrefixTrie",
                     {
                         InstanceAccessor<&JsPrefixTrie::Size>("size"),
                         InstanceAccessor<&JsPrefixTrie::Bytes>("bytes"),
                         InstanceMethod<&JsPrefixTrie::ParentOf>("parentOf"),
                         InstanceMethod<&JsPrefixTrie::Walk>("walk"),
                         InstanceMethod<&JsPrefixTrie::WalkBatch>("walkBatch"),
                         InstanceMethod<&JsPrefixTrie::MarkedDepths>("markedDepths"),
                     });
}

JsPrefixTrie::JsPrefixTrie(const Napi::CallbackInfo& info)
    : Napi::ObjectWrap<JsPrefixTrie>(info), trie_(PrefixTrie::randomSeed()) {}

Napi::Value JsPrefixTrie::Size(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(trie_.size()));
}

Napi::Value JsPrefixTrie::Bytes(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), static_cast<double>(trie_.bytes()));
}

Napi::Value JsPrefixTrie::ParentOf(const Napi::CallbackInfo& info) {
  const double node = requireInteger(info[0], "node", 0, static_cast<double>(trie_.size() - 1));
  return Napi::Number::New(info.Env(), trie_.parentOf(static_cast<uint32_t>(node)));
}

void JsPrefixTrie::requireRoom(Napi::Env env, uint64_t count) const {
  if (count > PrefixTrie::kMaxNodes - trie_.size()) {
    throwRangeError(env, kErrArgValue,
                    "the trie would exceed " + std::to_string(PrefixTrie::kMaxNodes) + " nodes (it has " +
                        std::to_string(trie_.size()) + ", the call brings up to " + std::to_string(count) + " more)");
  }
}

Napi::Value JsPrefixTrie::Walk(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto ids = requireTypedArray<double>(info[0], napi_float64_array, "ids", "Float64Array");
  auto path = requireTypedArray<uint32_t>(info[1], napi_uint32_array, "path", "Uint32Array");
  const size_t n = ids.ElementLength();
  requireLength(env, "path", path.ElementLength(), n);
  requireRoom(env, n);
  const double* data = ids.Data();
  ids_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!isSafeInteger(data[i])) badId(env, "ids", i, data[i]);
    ids_[i] = idKey(data[i]);
  }
  return Napi::Number::New(env, trie_.walk(ids_.data(), n, path.Data()));
}

Napi::Value JsPrefixTrie::WalkBatch(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto batch = requireTypedArray<double>(info[0], napi_float64_array, "batch", "Float64Array");
  auto seen = requireTypedArray<uint32_t>(info[1], napi_uint32_array, "seen", "Uint32Array");
  auto paths = requireTypedArray<uint32_t>(info[2], napi_uint32_array, "paths", "Uint32Array");
  const size_t words = batch.ElementLength();
  const double* data = batch.Data();
  // Check and convert everything first: a bad batch changes nothing. Later
  // steps read ids_ only, so paths may even alias the batch's memory.
  ids_.resize(words);
  size_t requests = 0;
  for (size_t at = 0; at < words; ++requests) {
    const double session = data[at];
    if (!(session >= 0 && session <= kMaxSession && session == std::trunc(session))) {
      throwRangeError(env, kErrArgValue,
                      "batch[" + std::to_string(at) + "] (request " + std::to_string(requests) +
                          "'s session) must be an integer in [0, 2^32), got " + formatNumber(session));
    }
    const double length = at + 1 < words ? data[at + 1] : -1;
    if (!(length >= 0 && length <= static_cast<double>(words - at - 2) && length == std::trunc(length))) {
      throwRangeError(env, kErrArgValue,
                      "batch[" + std::to_string(at + 1) + "] (request " + std::to_string(requests) +
                          "'s length) must be an integer that fits the batch (at most " +
                          std::to_string(at + 2 <= words ? words - at - 2 : 0) + "), got " +
                          (at + 1 < words ? formatNumber(length) : std::string("nothing")));
    }
    ids_[at] = static_cast<uint64_t>(session);
    ids_[at + 1] = static_cast<uint64_t>(length);
    const size_t end = at + 2 + static_cast<size_t>(length);
    for (size_t i = at + 2; i < end; ++i) {
      if (!isSafeInteger(data[i])) badId(env, "batch", i, data[i]);
      ids_[i] = idKey(data[i]);
    }
    at = end;
  }
  requireLength(env, "seen", seen.ElementLength(), requests);
  requireLength(env, "paths", paths.ElementLength(), words);
  requireRoom(env, words);
  uint32_t* out = paths.Data();
  uint32_t* seenOut = seen.Data();
  size_t r = 0;
  for (size_t at = 0; at < words; ++r) {
    const uint64_t length = ids_[at + 1];
    out[at] = static_cast<uint32_t>(ids_[at]);
    out[at + 1] = static_cast<uint32_t>(length);
    seenOut[r] = trie_.walk(&ids_[at + 2], length, out + at + 2);
    at += 2 + length;
  }
  return Napi::Number::New(env, static_cast<double>(requests));
}

Napi::Value JsPrefixTrie::MarkedDepths(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  auto counts = requireTypedArray<uint8_t>(info[0], napi_uint8_array, "counts", "Uint8Array");
  const double minCount = requireInteger(info[1], "minCount", 0, kMaxSafeInteger);
  auto depth = requireTypedArray<uint32_t>(info[2], napi_uint32_array, "depth", "Uint32Array");
  requireLength(env, "depth", depth.ElementLength(), trie_.size());
  // Counts are bytes: any minimum above 255 marks nothing, as 256 does.
  const auto min = static_cast<uint32_t>(minCount < 256 ? minCount : 256);
  trie_.markedDepths(counts.Data(), counts.ElementLength(), min, depth.Data());
  return env.Undefined();
}

}  // namespace kvroute
