// otlp-rows-fuzz — libFuzzer target for the tracing encoder's native half:
// request rows to span ops (otlp/request-rows.h) and span ops to OTLP
// protobuf (otlp/span-ops.h), as OtlpSpanWriter.writeRequests chains them.
//
// The rows are kvroute's own (src/proxy/observe/otlp-native.ts fills them),
// so this is not about hostile input: it holds the checks and the byte
// layout to their word on rows no test would write (counts at and past their
// limits, NaN, negative and huge numbers, ids and blocks out of range, spans
// whose lengths cross the one-, two- and three-byte varint sizes).
//
// Input: byte 0 the block count; per block a length byte (bit 6: a long one,
// up to ~32 KB, so spans pass 16,383 bytes) and its bytes; 11 layout slots;
// the caller's id bytes; then requests, each a row whose fields the input
// picks one by one (a small number, a block id, an id offset, a time, or one
// of the awkward doubles).
// Checked:
//   * a refused row names a field inside the rows and says why;
//   * accepted rows' ops either are refused by writeSpanOps (naming an op
//     inside the stream) or written: then the bytes are one `spans` field per
//     begun span, each length exact, each span starting with its trace id and
//     span id (the bytes the ops point at) and ending with its flags, and the
//     spans filling [at, end) exactly;
//   * the same ops written into a buffer one byte larger than they take give
//     the same bytes (a span's length is reserved as two bytes while it is
//     written); one byte less than they take is kNoRoom, and nothing is
//     written past the buffer (ASan);
//   * span ids the rows drew are never all zero.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "fuzz/fuzz-input.h"
#include "otlp/request-rows.h"
#include "otlp/span-ops.h"

namespace {

using kvroute::fuzz::FuzzInput;
using kvroute::fuzz::require;

constexpr size_t kMaxRequests = 8;

size_t readVarint(const std::vector<uint8_t>& b, size_t& p, size_t end) {
  size_t v = 0;
  for (int shift = 0; shift < 35; shift += 7) {
    require(p < end, "a varint runs past the spans");
    const uint8_t byte = b[p++];
    v |= static_cast<size_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return v;
  }
  require(false, "a varint is longer than five bytes");
  return 0;
}

// A double for one row field, chosen by the input.
double field(FuzzInput& in, size_t blockCount, size_t idBytes) {
  switch (in.below(8)) {
    case 0:
      return in.byte();
    case 1:
    case 2:
      return in.below(static_cast<uint32_t>(blockCount + 1));  // one past the last: unknown
    case 3:
      return in.below(static_cast<uint32_t>(idBytes + 2));
    case 4:
      return 1.7e12 + in.integer<uint32_t>() + in.byte() / 256.0;  // ms since the epoch
    case 5: {
      static const double kAwkward[] = {std::numeric_limits<double>::quiet_NaN(),
                                        -1,
                                        -0.5,
                                        0.5,
                                        1024,
                                        1025,
                                        1e15,
                                        1e300,
                                        std::numeric_limits<double>::infinity(),
                                        9007199254740992.0};
      return kAwkward[in.below(10)];
    }
    default:
      return in.below(4);  // counts and flags, mostly valid
  }
}

struct Begun {
  size_t trace;
  size_t span;
};

// The begin ops' id offsets, in order (ops writeSpanOps accepted are well formed).
std::vector<Begun> begunSpans(const std::vector<double>& ops) {
  static constexpr size_t kArgs[] = {0, 5, 2, 1, 2, 2, 1};
  std::vector<Begun> begun;
  for (size_t i = 0; i < ops.size();) {
    const int kind = static_cast<int>(ops[i]);
    if (kind == kvroute::kSpanOpBegin)
      begun.push_back({static_cast<size_t>(ops[i + 1]), static_cast<size_t>(ops[i + 2])});
    i += 1 + kArgs[kind];
  }
  return begun;
}

void checkSpans(const std::vector<uint8_t>& out, size_t at, size_t end, const std::vector<Begun>& begun,
                const std::vector<uint8_t>& ids) {
  size_t p = at;
  for (const Begun& b : begun) {
    require(p < end && out[p] == 0x12, "a span is not a ScopeSpans.spans field");
    ++p;
    const size_t length = readVarint(out, p, end);
    require(length <= end - p, "a span's length runs past the spans");
    const size_t q = p;
    p += length;
    require(length >= 2 + 16 + 2 + 8 + 6, "a span is too short for its ids and flags");
    require(out[q] == 0x0a && out[q + 1] == 16 && std::memcmp(&out[q + 2], &ids[b.trace], 16) == 0,
            "a span does not start with its trace id");
    require(out[q + 18] == 0x12 && out[q + 19] == 8 && std::memcmp(&out[q + 20], &ids[b.span], 8) == 0,
            "a span's id is not the one its op names");
    require(out[p - 6] == 0x85 && out[p - 5] == 0x01, "a span does not end with its flags");
  }
  require(p == end, "the spans do not fill [at, end)");
}

// Writes `ops` at `at` into a buffer of `capacity` bytes (exactly: a write past it trips ASan).
kvroute::SpanOpsResult write(const std::vector<double>& ops, const std::vector<uint8_t>& ids,
                             const kvroute::SpanBlocks& blocks, size_t at, size_t capacity, std::vector<uint8_t>& out) {
  out.assign(capacity, 0xee);
  return kvroute::writeSpanOps(ops.data(), ops.size(), ids.data(), ids.size(), blocks, out.data(), at, capacity);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  kvroute::SpanBlocks blocks;
  const size_t blockCount = 1 + in.below(24);
  size_t longBlocks = 0;
  for (size_t id = 0; id < blockCount; id++) {
    const uint8_t shape = in.byte();
    size_t length = 1 + (shape & 0x3f);
    if ((shape & 0x40) != 0 && longBlocks < 3) {
      length = 1 + (shape & 0x3f) * 512;
      longBlocks++;
    }
    std::vector<uint8_t> bytes(length, static_cast<uint8_t>(id));
    size_t got = 0;
    const uint8_t* p = in.bytes(length, &got);
    if (got > 0) std::memcpy(bytes.data(), p, got);
    require(blocks.set(id, bytes.data(), bytes.size()), "a block of 1 to 32,257 bytes was refused");
  }
  double layout[kvroute::kLayoutSlots];
  for (double& slot : layout) slot = in.byte() < 0xf0 ? in.below(static_cast<uint32_t>(blockCount)) : blockCount;

  std::vector<uint8_t> ids(16 + in.below(48));
  for (uint8_t& b : ids) b = in.byte();
  const size_t callerIdBytes = ids.size();

  std::vector<double> rows;
  const size_t requests = in.below(kMaxRequests + 1);
  for (size_t r = 0; r < requests && !in.empty(); r++) {
    const size_t routes = in.below(4);
    const size_t attempts = in.below(4);
    const size_t fields = kvroute::kRowFields + routes * kvroute::kRouteFields + attempts * kvroute::kAttemptFields;
    const size_t start = rows.size();
    for (size_t f = 0; f < fields; f++) rows.push_back(field(in, blockCount, callerIdBytes));
    // Mostly the counts the fields say (else the row is cut short or runs on).
    if (in.byte() < 0xe0) {
      rows[start + kvroute::kRowRoutes] = static_cast<double>(routes);
      rows[start + kvroute::kRowAttempts] = static_cast<double>(attempts);
    }
  }

  kvroute::SpanIdSource source;
  std::vector<double> ops;
  std::vector<kvroute::RowOps> rowOps;
  const kvroute::RequestRowsResult expanded =
      kvroute::expandRequestRows(rows.data(), rows.size(), layout, source, ops, ids, rowOps);
  if (!expanded.ok) {
    require(expanded.rowAt < rows.size() && expanded.problem != nullptr,
            "a refused row does not name a field inside the rows");
    return 0;
  }
  require((ids.size() - callerIdBytes) % 8 == 0, "drawn span ids are not 8 bytes each");
  for (size_t at = callerIdBytes; at < ids.size(); at += 8) {
    uint8_t zero[8] = {};
    require(std::memcmp(&ids[at], zero, 8) != 0, "a drawn span id is all zero");
  }

  const size_t at = in.below(4);
  std::vector<uint8_t> out;
  kvroute::SpanOpsResult written{};
  for (size_t capacity = at + (1 << 12); capacity <= (size_t{1} << 24); capacity *= 16) {
    written = write(ops, ids, blocks, at, capacity, out);
    if (written.status != kvroute::SpanOpsResult::kNoRoom) break;
  }
  if (written.status == kvroute::SpanOpsResult::kBadOp) {
    // opIndex == ops.size(): the last span does not end (rows never leave one open, but it is a valid answer).
    require(written.opIndex <= ops.size() && written.problem != nullptr, "a refused op is not inside the ops");
    return 0;
  }
  require(written.status == kvroute::SpanOpsResult::kOk, "16 MB was not room enough for the spans");
  require(written.end >= at && written.end <= out.size(), "the spans end outside the buffer");
  checkSpans(out, at, written.end, begunSpans(ops), ids);

  // One byte of slack past the end always suffices (span-ops.h); one byte short never does.
  std::vector<uint8_t> roomy;
  const kvroute::SpanOpsResult again = write(ops, ids, blocks, at, written.end + 1, roomy);
  require(again.status == kvroute::SpanOpsResult::kOk && again.end == written.end,
          "the same ops did not fit one byte more than they took");
  if (written.end > at) {
    require(std::memcmp(roomy.data() + at, out.data() + at, written.end - at) == 0,
            "the same ops wrote other bytes in a smaller buffer");
    std::vector<uint8_t> shortOut;
    const kvroute::SpanOpsResult cut = write(ops, ids, blocks, at, written.end - 1, shortOut);
    require(cut.status == kvroute::SpanOpsResult::kNoRoom, "a buffer one byte short was not kNoRoom");
  }
  return 0;
}
