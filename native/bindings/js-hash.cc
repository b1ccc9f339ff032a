#include "bindings/js-hash.h"

#include <vector>

#include "bindings/napi-util.h"
#include "hash/prompt-hash.h"
#include "hash/token-keys.h"
#include "util/xxhash64.h"

namespace kvroute {

Napi::Value JsHashPrompt(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throwTypeError(env, kErrArgType, "text must be a string");
  const size_t chunkBytes = static_cast<size_t>(requireInteger(info[1], "chunkBytes", 1, 1 << 24));
  std::vector<char> text;
  utf8Into(env, info[0], text);
  const size_t count = promptBlockCount(text.size(), chunkBytes);
  auto out = Napi::BigUint64Array::New(env, count);
  hashPromptBlocks(reinterpret_cast<const uint8_t*>(text.data()), text.size(), chunkBytes, out.Data());
  return out;
}

Napi::Value JsXxHash64(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint8_t* data = typedArrayData<uint8_t>(info[0], napi_uint8_array, 0, "bytes");
  const size_t length = info[0].As<Napi::Uint8Array>().ElementLength();
  if (!info[1].IsBigInt()) throwTypeError(env, kErrArgType, "seed must be a bigint");
  bool lossless = false;
  const uint64_t seed = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
  if (!lossless) throwRangeError(env, kErrArgValue, "seed must fit in 64 bits unsigned");
  return Napi::BigInt::New(env, xxhash64(data, length, seed));
}

Napi::Value JsHashTokenBlocks(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint32_t* tokens = typedArrayData<uint32_t>(info[0], napi_uint32_array, 0, "tokens");
  const size_t n = info[0].As<Napi::Uint32Array>().ElementLength();
  const uint32_t blockSize = static_cast<uint32_t>(requireInteger(info[1], "blockSize", 1, 1 << 24));
  bool hasParent = false;
  uint64_t parentKey = 0;
  if (!info[2].IsUndefined()) {
    if (!info[2].IsBigInt()) throwTypeError(env, kErrArgType, "parentKey must be a bigint or undefined");
    bool lossless = false;
    parentKey = info[2].As<Napi::BigInt>().Uint64Value(&lossless);
    if (!lossless) throwRangeError(env, kErrArgValue, "parentKey must fit in 64 bits unsigned");
    hasParent = true;
  }
  auto out = Napi::BigUint64Array::New(env, n / blockSize);
  hashTokenBlocks(tokens, n, blockSize, hasParent, parentKey, out.Data());
  return out;
}

}  // namespace kvroute
