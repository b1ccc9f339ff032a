#include "bindings/js-shm-feed.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bindings/napi-util.h"

namespace kvroute {

// The largest timestamp (ms) whose nanoseconds an int64 holds, rounded down.
constexpr double kMaxTimestampMs = 9223372036854.0;

namespace {

constexpr const char* kErrFeedClosed = "ERR_KVROUTE_FEED_CLOSED";

uint64_t toCount(double x) { return x > 0 && std::isfinite(x) ? static_cast<uint64_t>(x) : 0; }
uint32_t toCount32(double x) {
  return x > 0 && std::isfinite(x) ? static_cast<uint32_t>(x < 4294967295.0 ? x : 4294967295.0) : 0;
}

[[noreturn]] void throwClosed(Napi::Env env) {
  Napi::Error error = Napi::Error::New(env, "the feed is closed");
  error.Set("code", Napi::String::New(env, kErrFeedClosed));
  throw error;
}

}  // namespace

// ---------------------------------------------------------------- writer

Napi::Function JsFeedWriter::Define(Napi::Env env) {
  return DefineClass(env, "FeedWriter",
                     {InstanceMethod<&JsFeedWriter::Publish>("publish"), InstanceMethod<&JsFeedWriter::Info>("info"),
                      InstanceMethod<&JsFeedWriter::Close>("close")});
}

// new FeedWriter(path, slots, recreate)
JsFeedWriter::JsFeedWriter(const Napi::CallbackInfo& info) : Napi::ObjectWrap<JsFeedWriter>(info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throwTypeError(env, kErrArgType, "path must be a string");
  const auto slots = static_cast<uint32_t>(requireInteger(info[1], "slots", 1, shm::kMaxSlots));
  writer_ =
      std::make_unique<shm::FeedWriter>(info[0].As<Napi::String>().Utf8Value(), slots, info[2].ToBoolean().Value());
}

// publish(slot, values: Float64Array(kFeedFields), instance: string)
Napi::Value JsFeedWriter::Publish(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!writer_) throwClosed(env);
  const auto slot = static_cast<uint32_t>(requireInteger(info[0], "slot", 0, writer_->slotCount() - 1.0));
  const double* f = typedArrayData<double>(info[1], napi_float64_array, kFeedFields, "values");
  if (!info[2].IsString()) throwTypeError(env, kErrArgType, "instance must be a string");
  shm::SlotValues v;
  // The cast is defined only within int64's range (nanoseconds until 2262).
  if (!std::isnan(f[0]) && !(f[0] > 0 && f[0] < kMaxTimestampMs))
    throwRangeError(env, kErrArgValue,
                    "timestampMs must be a positive number of ms below " + formatNumber(kMaxTimestampMs) + ", got " +
                        formatNumber(f[0]));
  v.timestampNs = std::isnan(f[0]) ? shm::realtimeNs() : static_cast<int64_t>(f[0] * 1e6);
  v.running = toCount32(f[1]);
  v.waiting = toCount32(f[2]);
  v.kvBlocksUsed = toCount(f[3]);
  v.kvBlocksTotal = toCount(f[4]);
  v.pendingPrefillTokens = toCount(f[5]);
  v.maxPrefillRemaining = toCount(f[6]);
  v.decodeBatch = toCount32(f[7]);
  v.flags = toCount32(f[8]);
  v.prefixCacheQueries = toCount(f[9]);
  v.prefixCacheHits = toCount(f[10]);
  std::vector<char> id;
  utf8Into(env, info[2], id);
  std::memcpy(v.instance, id.data(), std::min(id.size(), shm::kInstanceIdBytes - 1));
  writer_->publish(slot, v);
  return env.Undefined();
}

// info() -> [slotCount, generation (bigint)]
Napi::Value JsFeedWriter::Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!writer_) throwClosed(env);
  Napi::Array out = Napi::Array::New(env, 2);
  out.Set(0u, Napi::Number::New(env, writer_->slotCount()));
  out.Set(1u, Napi::BigInt::New(env, writer_->generation()));
  return out;
}

Napi::Value JsFeedWriter::Close(const Napi::CallbackInfo& info) {
  writer_.reset();
  return info.Env().Undefined();
}

// ---------------------------------------------------------------- reader

Napi::Function JsFeedReader::Define(Napi::Env env) {
  return DefineClass(env, "FeedReader",
                     {InstanceMethod<&JsFeedReader::Refresh>("refresh"), InstanceMethod<&JsFeedReader::Info>("info"),
                      InstanceMethod<&JsFeedReader::Read>("read"), InstanceMethod<&JsFeedReader::Close>("close")});
}

// new FeedReader(path, recheckMs)
JsFeedReader::JsFeedReader(const Napi::CallbackInfo& info) : Napi::ObjectWrap<JsFeedReader>(info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) throwTypeError(env, kErrArgType, "path must be a string");
  const double recheckMs = requireInRange(info[1], "recheckMs", 0, 3.6e6);
  reader_ = std::make_unique<shm::FeedReader>(info[0].As<Napi::String>().Utf8Value(), recheckMs);
}

// refresh(force) -> status code (shm::FeedStatus)
Napi::Value JsFeedReader::Refresh(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!reader_) throwClosed(env);
  return Napi::Number::New(env, static_cast<int>(reader_->refresh(info[0].ToBoolean().Value())));
}

// info() -> [status, slotCount, generation (bigint)]
Napi::Value JsFeedReader::Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!reader_) throwClosed(env);
  Napi::Array out = Napi::Array::New(env, 3);
  out.Set(0u, Napi::Number::New(env, static_cast<int>(reader_->status())));
  out.Set(1u, Napi::Number::New(env, reader_->slotCount()));
  out.Set(2u, Napi::BigInt::New(env, reader_->generation()));
  return out;
}

// read(slot, out: Float64Array(kFeedFields)) -> instance id, or null (no consistent snapshot)
Napi::Value JsFeedReader::Read(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!reader_) throwClosed(env);
  const auto slot = static_cast<uint32_t>(requireInteger(info[0], "slot", 0, shm::kMaxSlots));
  double* out = typedArrayData<double>(info[1], napi_float64_array, kFeedFields, "out");
  shm::SlotValues v;
  if (!reader_->read(slot, v)) return env.Null();
  out[0] = static_cast<double>(v.timestampNs) / 1e6;
  out[1] = v.running;
  out[2] = v.waiting;
  out[3] = static_cast<double>(v.kvBlocksUsed);
  out[4] = static_cast<double>(v.kvBlocksTotal);
  out[5] = static_cast<double>(v.pendingPrefillTokens);
  out[6] = static_cast<double>(v.maxPrefillRemaining);
  out[7] = v.decodeBatch;
  out[8] = v.flags;
  out[9] = static_cast<double>(v.prefixCacheQueries);
  out[10] = static_cast<double>(v.prefixCacheHits);
  return Napi::String::New(env, v.instance, strnlen(v.instance, shm::kInstanceIdBytes));
}

Napi::Value JsFeedReader::Close(const Napi::CallbackInfo& info) {
  reader_.reset();
  return info.Env().Undefined();
}

}  // namespace kvroute
