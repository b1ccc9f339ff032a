#include "scan/json-text.h"

#include <charconv>
#include <cmath>

namespace kvroute {

size_t formatJsNumber(double x, char* out) {
  if (std::isnan(x)) {
    std::memcpy(out, "NaN", 3);
    return 3;
  }
  if (std::isinf(x)) {
    if (x > 0) {
      std::memcpy(out, "Infinity", 8);
      return 8;
    }
    std::memcpy(out, "-Infinity", 9);
    return 9;
  }
  if (x == 0) {  // both zeros
    out[0] = '0';
    return 1;
  }
  // The shortest round-trip digits in scientific form: "-d.ddde±x".
  char sci[kJsNumberMaxChars];
  const auto done = std::to_chars(sci, sci + sizeof sci, x, std::chars_format::scientific);
  const char* p = sci;
  const char* end = done.ptr;
  size_t o = 0;
  if (*p == '-') {
    out[o++] = '-';
    ++p;
  }
  char digits[20];
  int k = 0;
  for (; p < end && *p != 'e'; ++p) {
    if (*p != '.') digits[k++] = *p;
  }
  int e = 0;
  std::from_chars(p + 1 + (p[1] == '+' ? 1 : 0), end, e);
  const int n = e + 1;  // the decimal point sits after n digits
  if (k <= n && n <= 21) {
    std::memcpy(out + o, digits, k);
    o += k;
    for (int z = k; z < n; ++z) out[o++] = '0';
  } else if (0 < n && n <= 21) {
    std::memcpy(out + o, digits, n);
    o += n;
    out[o++] = '.';
    std::memcpy(out + o, digits + n, k - n);
    o += k - n;
  } else if (-6 < n && n <= 0) {
    out[o++] = '0';
    out[o++] = '.';
    for (int z = 0; z < -n; ++z) out[o++] = '0';
    std::memcpy(out + o, digits, k);
    o += k;
  } else {
    out[o++] = digits[0];
    if (k > 1) {
      out[o++] = '.';
      std::memcpy(out + o, digits + 1, k - 1);
      o += k - 1;
    }
    out[o++] = 'e';
    out[o++] = n - 1 < 0 ? '-' : '+';
    const auto exp = std::to_chars(out + o, out + kJsNumberMaxChars, n - 1 < 0 ? 1 - n : n - 1);
    o = static_cast<size_t>(exp.ptr - out);
  }
  return o;
}

bool arrayIndexKey(std::string_view key, uint32_t* index) {
  if (key.empty() || key.size() > 10) return false;
  if (key[0] == '0') {
    if (key.size() != 1) return false;
    *index = 0;
    return true;
  }
  uint64_t v = 0;
  for (const char c : key) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > 4294967294ull) return false;
  *index = static_cast<uint32_t>(v);
  return true;
}

std::string describeJsString(std::string_view s) {
  constexpr size_t kUnits = 40;
  // Walk code points, counting UTF-16 units, up to the 40th unit.
  size_t units = 0;
  size_t i = 0;
  bool halfPair = false;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    const size_t width = len == 4 ? 2 : 1;
    if (units + width > kUnits) {
      halfPair = units < kUnits;  // an astral character straddles unit 40
      break;
    }
    units += width;
    i += len;
  }
  std::string out;
  StringSink sink{out};
  if (i >= s.size()) {
    appendJsonQuoted(s, sink);
    return out;
  }
  appendJsonQuoted(s.substr(0, i), sink);
  out.pop_back();  // the closing quote
  if (halfPair) {
    // The high surrogate of the code point at i.
    const unsigned char* b = reinterpret_cast<const unsigned char*>(s.data() + i);
    const uint32_t cp = ((b[0] & 0x07u) << 18) | ((b[1] & 0x3Fu) << 12) | ((b[2] & 0x3Fu) << 6) | (b[3] & 0x3Fu);
    const uint32_t high = 0xD800 + ((cp - 0x10000) >> 10);
    static const char kHex[] = "0123456789abcdef";
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(high >> shift) & 15];
  }
  out += "\xE2\x80\xA6\"";  // "…" and the closing quote
  return out;
}

}  // namespace kvroute
