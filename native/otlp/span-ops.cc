#include "otlp/span-ops.h"

#include <cmath>
#include <cstring>

namespace kvroute {
namespace {

// Tags: (field number << 3) | wire type, as trace.proto and common.proto number them.
constexpr uint8_t kScopeSpansSpans = (2 << 3) | 2;
constexpr uint8_t kSpanTraceId = (1 << 3) | 2;
constexpr uint8_t kSpanSpanId = (2 << 3) | 2;
constexpr uint8_t kSpanParentSpanId = (4 << 3) | 2;
constexpr uint8_t kSpanKind = (6 << 3) | 0;
constexpr uint8_t kSpanStart = (7 << 3) | 1;
constexpr uint8_t kSpanEnd = (8 << 3) | 1;
constexpr uint8_t kSpanAttributes = (9 << 3) | 2;
constexpr uint8_t kSpanEvents = (11 << 3) | 2;
// Span.flags = 16 (fixed32): tag 133, two varint bytes.
constexpr uint8_t kSpanFlags0 = 0x85;
constexpr uint8_t kSpanFlags1 = 0x01;
constexpr uint8_t kEventTime = (1 << 3) | 1;
constexpr uint8_t kEventName = (2 << 3) | 2;
constexpr uint8_t kKey = (1 << 3) | 2;
constexpr uint8_t kValue = (2 << 3) | 2;
constexpr uint8_t kIntValue = (3 << 3) | 0;
constexpr uint8_t kDoubleValue = (4 << 3) | 1;
// SpanFlags: W3C sampled (bit 0); bit 8: bit 9 is meaningful; bit 9: the parent is remote.
constexpr uint32_t kFlagsSampled = 0x01;
constexpr uint32_t kFlagsHasIsRemote = 0x100;
constexpr uint32_t kFlagsIsRemote = 0x200;
constexpr double kMaxSafeInteger = 9007199254740991.0;
constexpr size_t kIdBytes[] = {16, 8};  // trace id, span id

size_t varintSize(uint64_t v) {
  size_t size = 1;
  while (v >= 0x80) {
    v >>= 7;
    size++;
  }
  return size;
}

// Writes into out[pos, capacity); `room` is false once anything did not fit
// (later writes are skipped, and the caller reports kNoRoom).
class Out {
 public:
  Out(uint8_t* out, size_t at, size_t capacity) : out_(out), pos_(at), capacity_(capacity) {}

  bool fits(size_t bytes) {
    if (room_ && bytes <= capacity_ - pos_) return true;
    room_ = false;
    return false;
  }
  void byte(uint8_t b) {
    if (fits(1)) out_[pos_++] = b;
  }
  void bytes(const void* data, size_t length) {
    if (!fits(length)) return;
    std::memcpy(out_ + pos_, data, length);
    pos_ += length;
  }
  void varint(uint64_t v) {
    if (!fits(varintSize(v))) return;
    while (v >= 0x80) {
      out_[pos_++] = static_cast<uint8_t>(v | 0x80);
      v >>= 7;
    }
    out_[pos_++] = static_cast<uint8_t>(v);
  }
  void u32(uint32_t v) {
    const uint8_t le[4] = {static_cast<uint8_t>(v), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v >> 16),
                           static_cast<uint8_t>(v >> 24)};
    bytes(le, 4);
  }
  void u64(uint64_t v) {
    u32(static_cast<uint32_t>(v));
    u32(static_cast<uint32_t>(v >> 32));
  }
  // ms since the epoch as fixed64 nanoseconds: seconds * 10^9 + the rounded
  // rest, exactly as ProtoWriter.nanos computes it (the same doubles, then an
  // exact integer sum where it splits the words).
  void nanos(uint8_t tag, double ms) {
    const double seconds = std::floor(ms / 1000);
    const double rest = std::round((ms - seconds * 1000) * 1e6);
    byte(tag);
    u64(static_cast<uint64_t>(seconds) * 1000000000ULL + static_cast<uint64_t>(rest));
  }

  // A length-delimited field whose length is known only at its end: two bytes
  // reserved (a span of 128 to 16,383 bytes then needs no move).
  size_t begin(uint8_t tag) {
    byte(tag);
    const size_t start = pos_;
    if (fits(2)) pos_ += 2;
    return start;
  }
  // False when the field is 2^21 bytes or longer.
  bool end(size_t start) {
    if (!room_) return true;
    const size_t length = pos_ - start - 2;
    const size_t size = varintSize(length);
    if (size > 3) return false;
    if (size != 2) {
      if (size == 3 && !fits(1)) return true;
      std::memmove(out_ + start + size, out_ + start + 2, length);
    }
    pos_ = start;
    varint(length);
    pos_ = start + size + length;
    return true;
  }

  bool room() const { return room_; }
  size_t pos() const { return pos_; }

 private:
  uint8_t* out_;
  size_t pos_;
  size_t capacity_;
  bool room_ = true;
};

// A KeyValue attribute of a number: int_value for a non-negative safe
// integer, double_value otherwise (as otlp-proto.ts's spanAttribute).
void numberAttribute(Out& w, const std::string& key, double value) {
  const bool integer = value >= 0 && value <= kMaxSafeInteger && std::floor(value) == value;
  const uint64_t asInt = integer ? static_cast<uint64_t>(value) : 0;
  const size_t any = integer ? 1 + varintSize(asInt) : 9;
  const size_t content = 1 + key.size() + 1 + varintSize(any) + any;
  w.byte(kSpanAttributes);
  w.varint(content);
  w.byte(kKey);
  w.bytes(key.data(), key.size());
  w.byte(kValue);
  w.varint(any);
  if (integer) {
    w.byte(kIntValue);
    w.varint(asInt);
  } else {
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    w.byte(kDoubleValue);
    w.u64(bits);
  }
}

}  // namespace

bool SpanBlocks::set(size_t id, const uint8_t* bytes, size_t length) {
  if (id >= kMaxBlocks || length == 0 || length > kMaxBlockBytes) return false;
  if (id >= blocks_.size()) blocks_.resize(id + 1);
  blocks_[id].assign(reinterpret_cast<const char*>(bytes), length);
  return true;
}

SpanOpsResult writeSpanOps(const double* ops, size_t opCount, const uint8_t* ids, size_t idBytes,
                           const SpanBlocks& blocks, uint8_t* out, size_t at, size_t capacity) {
  Out w(out, at, capacity);
  size_t spanStart = 0;
  bool inSpan = false;
  size_t i = 0;
  // The op at `op` needs `args` more doubles.
  auto bad = [&](size_t op, const char* problem) { return SpanOpsResult{SpanOpsResult::kBadOp, 0, op, problem}; };
  // An id's offset: whole, and its `length` bytes inside `ids`.
  auto idAt = [&](double x, size_t length, size_t* offset) {
    if (!(x >= 0 && x == std::floor(x) && x + static_cast<double>(length) <= static_cast<double>(idBytes)))
      return false;
    *offset = static_cast<size_t>(x);
    return true;
  };
  auto block = [&](double x) -> const std::string* {
    if (!(x >= 0 && x < static_cast<double>(SpanBlocks::kMaxBlocks) && x == std::floor(x))) return nullptr;
    return blocks.get(static_cast<size_t>(x));
  };
  static constexpr size_t kArgs[] = {0, 5, 2, 1, 2, 2, 1};
  while (i < opCount) {
    const size_t op = i;
    const double code = ops[i];
    if (!(code >= kSpanOpBegin && code <= kSpanOpEnd && code == std::floor(code))) return bad(op, "unknown op");
    const int kind = static_cast<int>(code);
    if (i + 1 + kArgs[kind] > opCount) return bad(op, "its arguments run past the end of the ops");
    const double* a = ops + i + 1;
    i += 1 + kArgs[kind];
    if ((kind == kSpanOpBegin) == inSpan) return bad(op, inSpan ? "a span begins inside a span" : "outside a span");
    switch (kind) {
      case kSpanOpBegin: {
        size_t trace, span, parent = 0;
        if (!idAt(a[0], kIdBytes[0], &trace) || !idAt(a[1], kIdBytes[1], &span))
          return bad(op, "id offset out of range");
        const bool hasParent = a[2] >= 0;
        if (hasParent && !idAt(a[2], kIdBytes[1], &parent)) return bad(op, "parent offset out of range");
        const std::string* name = block(a[3]);
        if (name == nullptr) return bad(op, "unknown name block");
        if (!(a[4] >= 0 && a[4] <= 5 && a[4] == std::floor(a[4]))) return bad(op, "span kind must be 0 to 5");
        spanStart = w.begin(kScopeSpansSpans);
        inSpan = true;
        w.byte(kSpanTraceId);
        w.byte(16);
        w.bytes(ids + trace, 16);
        w.byte(kSpanSpanId);
        w.byte(8);
        w.bytes(ids + span, 8);
        if (hasParent) {
          w.byte(kSpanParentSpanId);
          w.byte(8);
          w.bytes(ids + parent, 8);
        }
        w.bytes(name->data(), name->size());
        w.byte(kSpanKind);
        w.byte(static_cast<uint8_t>(a[4]));
        break;
      }
      case kSpanOpTimes:
        if (!(a[0] >= 0 && a[1] >= 0 && a[0] < 1e15 && a[1] < 1e15)) return bad(op, "times must be 0 to 10^15 ms");
        w.nanos(kSpanStart, a[0]);
        w.nanos(kSpanEnd, a[1]);
        break;
      case kSpanOpBlock: {
        const std::string* bytes = block(a[0]);
        if (bytes == nullptr) return bad(op, "unknown block");
        w.bytes(bytes->data(), bytes->size());
        break;
      }
      case kSpanOpNumber: {
        const std::string* key = block(a[0]);
        if (key == nullptr) return bad(op, "unknown key block");
        numberAttribute(w, *key, a[1]);
        break;
      }
      case kSpanOpEvent: {
        const std::string* name = block(a[0]);
        if (name == nullptr) return bad(op, "unknown event name block");
        if (!(a[1] >= 0 && a[1] < 1e15)) return bad(op, "an event's time must be 0 to 10^15 ms");
        w.byte(kSpanEvents);
        w.varint(9 + 1 + name->size());
        w.nanos(kEventTime, a[1]);
        w.byte(kEventName);
        w.bytes(name->data(), name->size());
        break;
      }
      case kSpanOpEnd:
        w.byte(kSpanFlags0);
        w.byte(kSpanFlags1);
        w.u32(kFlagsHasIsRemote | (a[0] != 0 ? kFlagsIsRemote : 0) | kFlagsSampled);
        if (!w.end(spanStart)) return bad(op, "a span of 2^21 bytes or more");
        inSpan = false;
        break;
    }
    if (!w.room()) return SpanOpsResult{SpanOpsResult::kNoRoom, 0, 0, nullptr};
  }
  if (inSpan) return bad(opCount, "the last span does not end");
  return SpanOpsResult{SpanOpsResult::kOk, w.pos(), 0, nullptr};
}

}  // namespace kvroute
