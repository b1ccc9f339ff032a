// js-prefix-trie — the JavaScript face of kvroute::PrefixTrie (class
// PrefixTrie), the native twin of src/trace/prefix-trie.ts with the same
// surface and results (src/core/native.ts declares it).
//
// Ids cross as Float64Array views of safe integers (negative ones too, as
// trace files may hold them); results land in caller-owned Uint32Arrays.
// walkBatch() walks a whole IdBatch (repeated [session, length, ids...]) in
// one crossing: the trie stage's hot path is ~1,000 calls for a 1M-request
// trace instead of 1M. Every argument is checked before the trie changes, so
// a bad one throws (TypeError/RangeError naming it) and leaves it as it was.
#pragma once

#include <napi.h>

#include <cstdint>
#include <vector>

#include "trie/prefix-trie.h"

namespace kvroute {

class JsPrefixTrie : public Napi::ObjectWrap<JsPrefixTrie> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit JsPrefixTrie(const Napi::CallbackInfo& info);

 private:
  // size: nodes, the root included.
  Napi::Value Size(const Napi::CallbackInfo& info);
  // bytes: heap bytes held (node chunks and table).
  Napi::Value Bytes(const Napi::CallbackInfo& info);
  // parentOf(node) -> number.
  Napi::Value ParentOf(const Napi::CallbackInfo& info);
  // walk(ids: Float64Array, path: Uint32Array) -> leading blocks already present.
  Napi::Value Walk(const Napi::CallbackInfo& info);
  // walkBatch(batch: Float64Array, seen: Uint32Array, paths: Uint32Array) -> requests.
  // paths[i] = batch[i] for the [session, length] headers, each id's node in
  // place of the id; seen[r] = request r's walk() result.
  Napi::Value WalkBatch(const Napi::CallbackInfo& info);
  // markedDepths(counts: Uint8Array, minCount: number, depth: Uint32Array) -> undefined.
  Napi::Value MarkedDepths(const Napi::CallbackInfo& info);

  // Checks `count` more nodes fit below PrefixTrie::kMaxNodes.
  void requireRoom(Napi::Env env, uint64_t count) const;

  PrefixTrie trie_;
  std::vector<uint64_t> ids_;  // the current call's ids, checked and converted
};

}  // namespace kvroute
