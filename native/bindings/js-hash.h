// js-hash — bindings for the hashing primitives, outside the routing hot path:
// tests compare them with the TypeScript twin, and the CLI prints prompt ids.
#pragma once

#include <napi.h>

namespace kvroute {

// hashPrompt(text: string, chunkBytes: number) -> BigUint64Array of chained ids.
Napi::Value JsHashPrompt(const Napi::CallbackInfo& info);
// xxhash64(bytes: Uint8Array, seed: bigint) -> bigint.
Napi::Value JsXxHash64(const Napi::CallbackInfo& info);

// hashTokenBlocks(tokens: Uint32Array, blockSize: number, parentKey?: bigint)
// -> BigUint64Array of floor(tokens.length / blockSize) token block keys.
Napi::Value JsHashTokenBlocks(const Napi::CallbackInfo& info);

}  // namespace kvroute
