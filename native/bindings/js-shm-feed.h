// js-shm-feed — the JavaScript face of the shared-memory engine-state feed
// (classes FeedWriter and FeedReader; docs/shm-layout.md).
//
// Values cross as one Float64Array of kFeedFields entries, in this order:
//   timestampMs, running, waiting, kvBlocksUsed, kvBlocksTotal,
//   pendingPrefillTokens, maxPrefillRemaining, decodeBatch, flags,
//   prefixCacheQueries, prefixCacheHits
// A NaN timestampMs on publish means "now". TypeScript validates the values;
// the binding only refuses what would corrupt the file.
#pragma once

#include <napi.h>

#include <memory>

#include "feed/shm-feed.h"

namespace kvroute {

constexpr size_t kFeedFields = 11;

class JsFeedWriter : public Napi::ObjectWrap<JsFeedWriter> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit JsFeedWriter(const Napi::CallbackInfo& info);

 private:
  Napi::Value Publish(const Napi::CallbackInfo& info);
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  std::unique_ptr<shm::FeedWriter> writer_;
};

class JsFeedReader : public Napi::ObjectWrap<JsFeedReader> {
 public:
  static Napi::Function Define(Napi::Env env);
  explicit JsFeedReader(const Napi::CallbackInfo& info);

 private:
  Napi::Value Refresh(const Napi::CallbackInfo& info);
  Napi::Value Info(const Napi::CallbackInfo& info);
  Napi::Value Read(const Napi::CallbackInfo& info);
  Napi::Value Close(const Napi::CallbackInfo& info);

  std::unique_ptr<shm::FeedReader> reader_;
};

}  // namespace kvroute
