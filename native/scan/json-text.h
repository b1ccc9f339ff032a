// json-text — JavaScript's text forms of JSON values, byte for byte.
//
// Why it exists: the request scanner (request-scan.h) must produce the same
// prompt text as the proxy's JavaScript path, which writes content parts and
// tool calls with JSON.stringify, completions prompt arrays with
// Array.prototype.join, and offending values in error messages with
// String()/JSON.stringify. Those texts are hashed into block ids, so a single
// byte of difference changes every id after it.
//
// - formatJsNumber: Number::toString (ECMA-262 Number::toString, radix 10):
//   the shortest digits that round-trip (std::to_chars, ties to the closest
//   then even, as V8), written plainly for exponents in [-7, 21) and as
//   d[.ddd]e±x outside it; -0 is "0".
// - appendJsonQuoted: JSON.stringify of a string: \" \\ \b \f \n \r \t, other
//   controls below U+0020 as \u00xx (lowercase hex), everything else raw.
//   The input is well-formed UTF-8 (no lone surrogates: the scanner hands
//   those to the JavaScript path).
// - arrayIndexKey: whether an object key is an array index, which V8 (like the
//   spec's OrdinaryOwnPropertyKeys) enumerates first, in ascending order.
//
// Complexity: linear in the output; no allocation besides the sink's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kvroute {

// Enough for any double: "-1.2345678901234567e-308" is 24 characters.
constexpr size_t kJsNumberMaxChars = 32;

// Writes String(x) to `out` (kJsNumberMaxChars bytes) and returns its length.
size_t formatJsNumber(double x, char* out);

// True when `key` is a canonical array index: "0", or digits without a
// leading zero whose value is at most 2^32 - 2. Sets `*index` then.
bool arrayIndexKey(std::string_view key, uint32_t* index);

// Appends JSON.stringify(s) (with its quotes) to `sink`, which has
// append(const char*, size_t). Runs of bytes that need no escape are appended
// in one call.
template <typename Sink>
void appendJsonQuoted(std::string_view s, Sink& sink) {
  static const char kHex[] = "0123456789abcdef";
  sink.append("\"", 1);
  const char* p = s.data();
  const char* end = p + s.size();
  const char* run = p;
  for (; p < end; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    if (p > run) sink.append(run, static_cast<size_t>(p - run));
    run = p + 1;
    char esc[6] = {'\\', 0, 0, 0, 0, 0};
    size_t n = 2;
    switch (c) {
      case '"':
        esc[1] = '"';
        break;
      case '\\':
        esc[1] = '\\';
        break;
      case '\b':
        esc[1] = 'b';
        break;
      case '\f':
        esc[1] = 'f';
        break;
      case '\n':
        esc[1] = 'n';
        break;
      case '\r':
        esc[1] = 'r';
        break;
      case '\t':
        esc[1] = 't';
        break;
      default:
        esc[1] = 'u';
        esc[2] = '0';
        esc[3] = '0';
        esc[4] = kHex[c >> 4];
        esc[5] = kHex[c & 15];
        n = 6;
    }
    sink.append(esc, n);
  }
  if (p > run) sink.append(run, static_cast<size_t>(p - run));
  sink.append("\"", 1);
}

// A std::string as a sink.
struct StringSink {
  std::string& out;
  void append(const char* p, size_t n) { out.append(p, n); }
};

// How kvroute's describe() (src/core/errors.ts) shows a string in an error
// message: JSON.stringify of its first 40 UTF-16 code units plus "…" when it
// is longer. A surrogate pair cut in half leaves its high surrogate, which
// JSON.stringify writes as \udxxx.
std::string describeJsString(std::string_view utf8);

}  // namespace kvroute
