// span-ops — OTLP spans (opentelemetry-proto's trace.proto Span messages, as
// ScopeSpans.spans fields) written from a stream of ops: the native half of
// the proxy's span encoder (request-rows.h makes the ops from the rows
// src/proxy/observe/otlp-native.ts fills; src/proxy/observe/otlp-proto.ts is
// the TypeScript encoder they must match byte for byte; test/otlp-native.test.ts
// compares the two).
//
// What a span holds — its attributes, their order, their names — is decided
// by request-rows.cc (mirroring span-attributes.ts); this file knows only the
// protobuf wire format of the fields it writes. Strings never cross: every
// name and string attribute arrives pre-encoded as a block (SpanBlocks),
// numbers as doubles.
//
// Op stream (doubles; offsets index the id bytes):
//   kBegin traceIdAt spanIdAt parentAt nameBlock kind   parentAt < 0: no parent
//   kTimes startMs endMs                                ms since the epoch
//   kBlock block                                        its bytes, as they are
//   kNumber keyBlock value                              int_value or double_value
//   kEvent nameBlock atMs                               a Span.Event
//   kEnd remoteParent                                   flags, then the length
//
// Invariant: a span is shorter than 2^21 bytes (the TypeScript side truncates
// strings to 4,096 characters), so its length takes at most three bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvroute {

enum SpanOp : int {
  kSpanOpBegin = 1,
  kSpanOpTimes = 2,
  kSpanOpBlock = 3,
  kSpanOpNumber = 4,
  kSpanOpEvent = 5,
  kSpanOpEnd = 6,
};

// Pre-encoded byte strings, by small id (the TypeScript side assigns ids).
class SpanBlocks {
 public:
  static constexpr size_t kMaxBlocks = 1 << 16;
  static constexpr size_t kMaxBlockBytes = 1 << 16;

  // False when `id` is out of range or the block is empty or too long.
  bool set(size_t id, const uint8_t* bytes, size_t length);
  void clear() { blocks_.clear(); }
  // Null when `id` was never set (no block is empty).
  const std::string* get(size_t id) const {
    return id < blocks_.size() && !blocks_[id].empty() ? &blocks_[id] : nullptr;
  }

 private:
  std::vector<std::string> blocks_;
};

// What writeSpanOps did.
struct SpanOpsResult {
  enum Status { kOk, kNoRoom, kBadOp } status;
  size_t end;           // kOk: where the spans end in `out`
  size_t opIndex;       // kBadOp: the op's index in the stream
  const char* problem;  // kBadOp: what is wrong with it
};

// Writes the spans `ops` describe into out[at, capacity). kNoRoom when they do
// not fit (out past `at` is then scratch: the caller grows it and calls again).
// The spans may need one byte more than they end up taking: a span's length
// is reserved as two bytes while it is written, and a span under 128 bytes
// then moves back by one (native/fuzz/otlp-rows-fuzz.cc holds it to this).
SpanOpsResult writeSpanOps(const double* ops, size_t opCount, const uint8_t* ids, size_t idBytes,
                           const SpanBlocks& blocks, uint8_t* out, size_t at, size_t capacity);

}  // namespace kvroute
