#include "scan/json-bytes.h"

#include <cstring>

namespace kvroute {
namespace {

bool numberChar(uint8_t c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}
bool letter(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool hexDigit(uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

// ---- error-path classification ---------------------------------------------

// Skips the string starting at bytes[i] == '"'; returns the index after its
// closing quote (or len). The input passed simdjson's stage 1, so every
// string is closed.
size_t skipString(const uint8_t* bytes, size_t len, size_t i) {
  for (size_t j = i + 1;;) {
    const void* q = std::memchr(bytes + j, '"', len - j);
    if (q == nullptr) return len;
    const size_t at = static_cast<size_t>(static_cast<const uint8_t*>(q) - bytes);
    size_t slashes = 0;
    while (at - slashes > i + 1 && bytes[at - slashes - 1] == '\\') ++slashes;
    if (slashes % 2 == 0) return at + 1;
    j = at + 1;
  }
}

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? over the whole of s.
static bool numberGrammar(const uint8_t* s, size_t n) {
  size_t i = 0;
  auto digits = [&]() {
    const size_t start = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < n && s[i] == '-') ++i;
  if (i < n && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < n && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < n && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == n;
}

// Whether some number token outside strings is malformed. In valid JSON every
// maximal run of number characters that starts with '-' or a digit (and does
// not continue a word) is a number token, so a malformed run proves the body
// invalid; if every run is well-formed, simdjson's number error was one of
// range, which JSON.parse accepts.
bool hasMalformedNumber(const uint8_t* bytes, size_t len) {
  for (size_t i = 0; i < len;) {
    const uint8_t c = bytes[i];
    if (c == '"') {
      i = skipString(bytes, len, i);
      continue;
    }
    if ((c == '-' || (c >= '0' && c <= '9')) && (i == 0 || (!numberChar(bytes[i - 1]) && !letter(bytes[i - 1])))) {
      size_t j = i;
      while (j < len && numberChar(bytes[j])) ++j;
      if (!numberGrammar(bytes + i, j - i)) return true;
      i = j;
      continue;
    }
    ++i;
  }
  return false;
}

// Whether some string holds an escape JSON does not have (valid JSON has none,
// so one proves the body invalid; without one, simdjson's string error was an
// unpaired surrogate, which JSON.parse accepts).
bool hasMalformedEscape(const uint8_t* bytes, size_t len) {
  bool inString = false;
  for (size_t i = 0; i < len; ++i) {
    const uint8_t c = bytes[i];
    if (!inString) {
      inString = c == '"';
      continue;
    }
    if (c == '"') {
      inString = false;
    } else if (c == '\\') {
      if (i + 1 >= len) return true;
      const uint8_t e = bytes[++i];
      if (e == 'u') {
        if (i + 4 >= len || !hexDigit(bytes[i + 1]) || !hexDigit(bytes[i + 2]) || !hexDigit(bytes[i + 3]) ||
            !hexDigit(bytes[i + 4])) {
          return true;
        }
        i += 4;
      } else if (std::strchr("\"\\/bfnrt", e) == nullptr || e == 0) {
        return true;
      }
    }
  }
  return false;
}

// ---- top-level member spans (strip) ----------------------------------------

static size_t skipSpace(const uint8_t* bytes, size_t len, size_t i) {
  while (i < len && space(bytes[i])) ++i;
  return i;
}

// The index after the value starting at bytes[i] (valid JSON).
static size_t skipValue(const uint8_t* bytes, size_t len, size_t i) {
  const uint8_t c = bytes[i];
  if (c == '"') return skipString(bytes, len, i);
  if (c == '{' || c == '[') {
    size_t depth = 0;
    while (i < len) {
      const uint8_t d = bytes[i];
      if (d == '"') {
        i = skipString(bytes, len, i);
        continue;
      }
      if (d == '{' || d == '[') ++depth;
      if ((d == '}' || d == ']') && --depth == 0) return i + 1;
      ++i;
    }
    return len;
  }
  while (i < len && !space(bytes[i]) && bytes[i] != ',' && bytes[i] != '}' && bytes[i] != ']') ++i;
  return i;
}

// Ranges dropping the members flagged in `drop` (in document order) from the
// top-level object of the valid JSON `bytes`.
void stripRanges(const uint8_t* bytes, size_t len, const std::vector<bool>& drop, std::vector<size_t>& out) {
  std::vector<size_t> keyStart;
  std::vector<size_t> valueEnd;
  keyStart.reserve(drop.size());
  valueEnd.reserve(drop.size());
  size_t i = skipSpace(bytes, len, 0) + 1;  // past '{'
  for (size_t k = 0; k < drop.size(); ++k) {
    i = skipSpace(bytes, len, i);
    if (bytes[i] == ',') i = skipSpace(bytes, len, i + 1);
    keyStart.push_back(i);
    i = skipSpace(bytes, len, skipString(bytes, len, i)) + 1;  // past ':'
    i = skipValue(bytes, len, skipSpace(bytes, len, i));
    valueEnd.push_back(i);
  }
  const size_t n = drop.size();
  size_t firstKept = n;
  for (size_t k = 0; k < n; ++k) {
    if (!drop[k]) {
      firstKept = k;
      break;
    }
  }
  auto add = [&out](size_t a, size_t b) {
    if (!out.empty() && out.back() == a) {
      out.back() = b;  // adjacent: merge
    } else {
      out.push_back(a);
      out.push_back(b);
    }
  };
  for (size_t k = 0; k < n; ++k) {
    if (!drop[k]) continue;
    if (k < firstKept) {
      // Before every kept member: drop it with the separator after it.
      add(keyStart[k], k + 1 < n ? keyStart[k + 1] : valueEnd[k]);
    } else {
      // After a kept member: drop the separator before it with it.
      add(valueEnd[k - 1], valueEnd[k]);
    }
  }
}

size_t copyStripped(const uint8_t* bytes, size_t len, const std::vector<size_t>& strip, uint8_t* out) {
  size_t o = 0;
  size_t from = 0;
  for (size_t k = 0; k + 1 < strip.size(); k += 2) {
    std::memcpy(out + o, bytes + from, strip[k] - from);
    o += strip[k] - from;
    from = strip[k + 1];
  }
  std::memcpy(out + o, bytes + from, len - from);
  return o + len - from;
}

}  // namespace kvroute
