// request-rows — a request's spans from one row of numbers: the ops
// (span-ops.h) of its routing decisions' spans, its upstream attempts' spans
// and its own span, in that order, as src/proxy/observe/otlp-proto.ts encodes
// them. The proxy fills a row as a request ends (src/proxy/observe/
// otlp-native.ts); the span layout is then made here, not by JavaScript
// walking the request's records (that walk was ~1.4 µs of the ~2 µs a request's
// encoding took in the server).
//
// Hazard: the attributes and their order mirror span-attributes.ts (the
// TypeScript encoder's, and an embedder's exporter's, source of truth). A
// change there is a change here; test/otlp-native.test.ts compares the two
// encoders' spans on random requests and fails on any difference.
//
// Strings still never cross: every string attribute is a block id (a block
// holds the whole KeyValue field), numbers are doubles, and the number
// attributes' keys and the fixed names are blocks named by the layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvroute {

// The layout: block ids every row's spans use.
enum RowLayoutSlot : int {
  kLayoutRouteName,     // the decision span's name
  kLayoutUpstreamName,  // the attempt span's name
  kLayoutFirstToken,    // event names
  kLayoutCompletion,
  kLayoutStatusKey,  // number attributes' keys
  kLayoutInputTokensKey,
  kLayoutCachedTokensKey,
  kLayoutMatchedBlocksKey,
  kLayoutPredictedCachedKey,
  kLayoutPredictedTtftKey,
  kLayoutAttemptKey,
  kLayoutSlots
};

// A request's row: these fields, then kRowRoutes decisions of kRouteFields,
// then kRowAttempts attempts of kAttemptFields. Ids are offsets into the id
// bytes (a trace id 16 bytes, span ids 8); times are ms since the epoch; a
// block id < 0 and a time of 0 mean "none"; flags are 0 or 1.
enum RequestRowField : int {
  kRowTraceIdAt,
  kRowParentAt,  // the client's span; < 0: the trace is new
  kRowStart,
  kRowEnd,
  kRowFirstByteAt,
  kRowNameBlock,
  kRowRouteBlock,  // the route's attributes (method, path, route)
  kRowModelBlock,
  kRowStatus,
  kRowOutcomeBlock,
  kRowHasUsage,
  kRowInputTokens,
  kRowCachedTokens,
  kRowRoutes,
  kRowAttempts,
  kRowFields
};

enum RouteRowField : int {
  kRouteAt,
  kRouteInstanceBlock,  // kvroute.instance as a string attribute
  kRouteReasonBlock,
  kRouteMatchedBlocks,
  kRoutePredictedCached,
  kRouteKeysBlock,
  kRoutePolicyBlock,
  kRouteHasTtft,
  kRoutePredictedTtft,
  kRouteFields
};

enum AttemptRowField : int {
  kAttemptSpanIdAt,
  kAttemptStart,
  kAttemptEnd,
  kAttemptInstanceBlock,  // the instance's attributes (instance, server address and port)
  kAttemptNumber,
  kAttemptStatus,  // 0: the engine gave none
  kAttemptFirstByteAt,
  kAttemptFields
};

// New span ids (the request's and its decisions'; the attempts' left earlier,
// in their traceparent): 8 random bytes, never all zero. splitmix64 seeded
// from std::random_device, as the OpenTelemetry SDKs draw ids from a
// non-cryptographic generator.
class SpanIdSource {
 public:
  SpanIdSource();
  void next(uint8_t* out);

 private:
  uint64_t state_;
};

// Where a request's ops begin, and its row.
struct RowOps {
  size_t opStart;
  size_t rowStart;
};

struct RequestRowsResult {
  bool ok;
  size_t rowAt;         // !ok: the field of rows that is wrong
  const char* problem;  // !ok: what is wrong with it
};

// Appends to `ops` the ops of rows[0, count), to `ids` the new span ids they
// name (`ids` holds the caller's id bytes before them), and to `requests`
// where each request's ops begin. Checks the rows' shape (counts, flags, that
// each row is whole); the ids, blocks and times are checked by writeSpanOps.
RequestRowsResult expandRequestRows(const double* rows, size_t count, const double* layout, SpanIdSource& source,
                                    std::vector<double>& ops, std::vector<uint8_t>& ids, std::vector<RowOps>& requests);

}  // namespace kvroute
