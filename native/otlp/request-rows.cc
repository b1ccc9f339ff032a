#include "otlp/request-rows.h"

#include <cmath>
#include <random>

#include "otlp/span-ops.h"

namespace kvroute {
namespace {

// OTLP Span.SpanKind.
constexpr double kInternal = 1;
constexpr double kServer = 2;
constexpr double kClient = 3;
// At most this many decisions or attempts in one request (a retry budget is a handful).
constexpr double kMaxPerRequest = 1024;

bool isFlag(double x) { return x == 0 || x == 1; }
bool isCount(double x) { return x >= 0 && x <= kMaxPerRequest && x == std::floor(x); }

class OpsOut {
 public:
  explicit OpsOut(std::vector<double>& ops) : ops_(ops) {}
  void op(double code, double a) {
    ops_.push_back(code);
    ops_.push_back(a);
  }
  void op(double code, double a, double b) {
    ops_.push_back(code);
    ops_.push_back(a);
    ops_.push_back(b);
  }
  void begin(double trace, double span, double parent, double name, double kind) {
    const double begin[] = {kSpanOpBegin, trace, span, parent, name, kind};
    ops_.insert(ops_.end(), begin, begin + 6);
  }

 private:
  std::vector<double>& ops_;
};

}  // namespace

SpanIdSource::SpanIdSource() {
  std::random_device device;
  state_ = (static_cast<uint64_t>(device()) << 32) ^ device();
}

void SpanIdSource::next(uint8_t* out) {
  uint64_t z = 0;
  while (z == 0) {  // an all-zero span id is invalid
    z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
  }
  for (int i = 0; i < 8; i++) out[i] = static_cast<uint8_t>(z >> (8 * i));
}

RequestRowsResult expandRequestRows(const double* rows, size_t count, const double* layout, SpanIdSource& source,
                                    std::vector<double>& ops, std::vector<uint8_t>& ids,
                                    std::vector<RowOps>& requests) {
  OpsOut out(ops);
  auto bad = [](size_t at, const char* problem) { return RequestRowsResult{false, at, problem}; };
  // A new span id: its offset in `ids`.
  auto newId = [&]() {
    const size_t at = ids.size();
    ids.resize(at + 8);
    source.next(ids.data() + at);
    return static_cast<double>(at);
  };
  size_t i = 0;
  while (i < count) {
    const size_t row = i;
    if (count - i < kRowFields) return bad(row, "the request's row is cut short");
    const double* r = rows + i;
    if (!isCount(r[kRowRoutes])) return bad(row + kRowRoutes, "decisions must be a whole number 0 to 1024");
    if (!isCount(r[kRowAttempts])) return bad(row + kRowAttempts, "attempts must be a whole number 0 to 1024");
    if (!isFlag(r[kRowHasUsage])) return bad(row + kRowHasUsage, "a flag must be 0 or 1");
    const size_t routes = static_cast<size_t>(r[kRowRoutes]);
    const size_t attempts = static_cast<size_t>(r[kRowAttempts]);
    const size_t length = kRowFields + routes * kRouteFields + attempts * kAttemptFields;
    if (count - i < length) return bad(row, "the request's row is cut short");
    requests.push_back(RowOps{ops.size(), row});
    const double trace = r[kRowTraceIdAt];
    const double requestSpan = newId();
    const double* route = r + kRowFields;
    for (size_t k = 0; k < routes; k++, route += kRouteFields) {
      if (!isFlag(route[kRouteHasTtft])) return bad(row + (route - r) + kRouteHasTtft, "a flag must be 0 or 1");
      out.begin(trace, newId(), requestSpan, layout[kLayoutRouteName], kInternal);
      out.op(kSpanOpTimes, route[kRouteAt], route[kRouteAt]);
      out.op(kSpanOpBlock, route[kRouteInstanceBlock]);
      out.op(kSpanOpBlock, route[kRouteReasonBlock]);
      out.op(kSpanOpNumber, layout[kLayoutMatchedBlocksKey], route[kRouteMatchedBlocks]);
      out.op(kSpanOpNumber, layout[kLayoutPredictedCachedKey], route[kRoutePredictedCached]);
      out.op(kSpanOpBlock, route[kRouteKeysBlock]);
      out.op(kSpanOpBlock, route[kRoutePolicyBlock]);
      if (route[kRouteHasTtft] == 1) out.op(kSpanOpNumber, layout[kLayoutPredictedTtftKey], route[kRoutePredictedTtft]);
      out.op(kSpanOpEnd, 0);
    }
    const double* attempt = route;
    for (size_t k = 0; k < attempts; k++, attempt += kAttemptFields) {
      out.begin(trace, attempt[kAttemptSpanIdAt], requestSpan, layout[kLayoutUpstreamName], kClient);
      out.op(kSpanOpTimes, attempt[kAttemptStart], attempt[kAttemptEnd]);
      out.op(kSpanOpBlock, attempt[kAttemptInstanceBlock]);
      out.op(kSpanOpNumber, layout[kLayoutAttemptKey], attempt[kAttemptNumber]);
      if (attempt[kAttemptStatus] != 0) out.op(kSpanOpNumber, layout[kLayoutStatusKey], attempt[kAttemptStatus]);
      if (attempt[kAttemptFirstByteAt] != 0)
        out.op(kSpanOpEvent, layout[kLayoutFirstToken], attempt[kAttemptFirstByteAt]);
      out.op(kSpanOpEnd, 0);
    }
    const bool hasParent = r[kRowParentAt] >= 0;
    out.begin(trace, requestSpan, hasParent ? r[kRowParentAt] : -1, r[kRowNameBlock], kServer);
    out.op(kSpanOpTimes, r[kRowStart], r[kRowEnd]);
    out.op(kSpanOpBlock, r[kRowRouteBlock]);
    if (r[kRowModelBlock] >= 0) out.op(kSpanOpBlock, r[kRowModelBlock]);
    out.op(kSpanOpNumber, layout[kLayoutStatusKey], r[kRowStatus]);
    out.op(kSpanOpBlock, r[kRowOutcomeBlock]);
    if (r[kRowHasUsage] == 1) {
      out.op(kSpanOpNumber, layout[kLayoutInputTokensKey], r[kRowInputTokens]);
      out.op(kSpanOpNumber, layout[kLayoutCachedTokensKey], r[kRowCachedTokens]);
    }
    if (r[kRowFirstByteAt] != 0) out.op(kSpanOpEvent, layout[kLayoutFirstToken], r[kRowFirstByteAt]);
    out.op(kSpanOpEvent, layout[kLayoutCompletion], r[kRowEnd]);
    out.op(kSpanOpEnd, hasParent ? 1 : 0);
    i += length;
  }
  return RequestRowsResult{true, 0, nullptr};
}

}  // namespace kvroute
