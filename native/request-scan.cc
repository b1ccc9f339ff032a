#include "request-scan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "json-text.h"
#include "prompt-hash.h"
#include "simdjson.h"

namespace kvroute {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr char kRS = '\x1e';
constexpr char kUS = '\x1f';
constexpr double kMaxSafeInteger = 9007199254740991.0;  // 2^53 - 1
constexpr size_t kSmallObject = 16;                     // members: quadratic duplicate check below this

// An element's value as JavaScript's Number: integers convert with
// round-to-nearest, which is what JSON.parse's decimal conversion yields.
double numberOf(const element& e) {
  switch (e.type()) {
    case element_type::INT64:
      return static_cast<double>(e.get_int64().value_unsafe());
    case element_type::UINT64:
      return static_cast<double>(e.get_uint64().value_unsafe());
    default:
      return e.get_double().value_unsafe();
  }
}

// Handles by value: a range-for over get_array().value_unsafe() would iterate
// a reference into a destroyed temporary.
simdjson::dom::array arrayOf(const element& e) { return e.get_array().value_unsafe(); }
simdjson::dom::object objectOf(const element& e) { return e.get_object().value_unsafe(); }

bool isNumber(element_type t) {
  return t == element_type::INT64 || t == element_type::UINT64 || t == element_type::DOUBLE;
}

// describe() of src/core/errors.ts: how an offending value shows in a message.
std::string describe(const element* e) {
  if (e == nullptr) return "undefined";
  char num[kJsNumberMaxChars];
  switch (e->type()) {
    case element_type::STRING:
      return describeJsString(e->get_string().value_unsafe());
    case element_type::NULL_VALUE:
      return "null";
    case element_type::ARRAY:
      return "an array";
    case element_type::OBJECT:
      return "an object";
    case element_type::BOOL:
      return e->get_bool().value_unsafe() ? "true" : "false";
    default:
      return std::string(num, formatJsNumber(numberOf(*e), num));
  }
}

bool keyIs(std::string_view key, std::string_view name) { return key == name; }

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

bool numberChar(uint8_t c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}
bool letter(uint8_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? over the whole of s.
bool numberGrammar(const uint8_t* s, size_t n) {
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

bool hexDigit(uint8_t c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

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

bool space(uint8_t c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t skipSpace(const uint8_t* bytes, size_t len, size_t i) {
  while (i < len && space(bytes[i])) ++i;
  return i;
}

// The index after the value starting at bytes[i] (valid JSON).
size_t skipValue(const uint8_t* bytes, size_t len, size_t i) {
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

// ---- the prompt text -------------------------------------------------------

struct Member {
  std::string_view key;
  element value;
  uint32_t index;  // array index, when isIndex
  bool isIndex;
};

class TextWriter {
 public:
  TextWriter(PromptHasher& hasher, std::vector<Member>& members) : hasher_(hasher), members_(members) {}

  void append(const char* p, size_t n) { hasher_.append(p, n); }
  void put(char c) { hasher_.append(&c, 1); }
  void text(std::string_view s) { hasher_.append(s.data(), s.size()); }
  void number(double x) {
    char buf[kJsNumberMaxChars];
    hasher_.append(buf, formatJsNumber(x, buf));
  }

  // JSON.stringify(e) of a parsed JSON value.
  void stringify(const element& e) {
    switch (e.type()) {
      case element_type::ARRAY: {
        put('[');
        bool first = true;
        for (element x : arrayOf(e)) {
          if (!first) put(',');
          first = false;
          stringify(x);
        }
        put(']');
        break;
      }
      case element_type::OBJECT:
        stringifyObject(e);
        break;
      case element_type::STRING:
        appendJsonQuoted(e.get_string().value_unsafe(), *this);
        break;
      case element_type::BOOL:
        text(e.get_bool().value_unsafe() ? "true" : "false");
        break;
      case element_type::NULL_VALUE:
        text("null");
        break;
      default: {
        const double x = numberOf(e);
        if (std::isfinite(x)) {
          number(x);
        } else {
          text("null");  // unreachable: such numbers take the fallback
        }
      }
    }
  }

  // String(array), as Array.prototype.join(","): false when an object in it
  // has a toString member (String() of it throws a TypeError).
  bool join(const element& e) {
    bool first = true;
    for (element x : arrayOf(e)) {
      if (!first) put(',');
      first = false;
      switch (x.type()) {
        case element_type::NULL_VALUE:
          break;
        case element_type::STRING:
          text(x.get_string().value_unsafe());
          break;
        case element_type::BOOL:
          text(x.get_bool().value_unsafe() ? "true" : "false");
          break;
        case element_type::ARRAY:
          if (!join(x)) return false;
          break;
        case element_type::OBJECT:
          for (auto field : objectOf(x)) {
            if (keyIs(field.key, "toString")) return false;
          }
          text("[object Object]");
          break;
        default:
          number(numberOf(x));
      }
    }
    return true;
  }

 private:
  // Members in V8's order: array-index keys ascending, then the rest by first
  // occurrence; a duplicate key keeps its first position and its last value.
  void stringifyObject(const element& e) {
    const size_t base = members_.size();
    bool anyIndex = false;
    for (auto field : objectOf(e)) {
      Member m{field.key, field.value, 0, false};
      m.isIndex = arrayIndexKey(field.key, &m.index);
      anyIndex = anyIndex || m.isIndex;
      members_.push_back(m);
    }
    size_t n = members_.size() - base;
    if (n > 1) n = dedupe(base, n);
    if (anyIndex) {
      std::stable_sort(members_.begin() + static_cast<std::ptrdiff_t>(base),
                       members_.begin() + static_cast<std::ptrdiff_t>(base + n), [](const Member& a, const Member& b) {
                         if (a.isIndex != b.isIndex) return a.isIndex;
                         return a.isIndex && a.index < b.index;
                       });
    }
    put('{');
    for (size_t k = 0; k < n; ++k) {
      const Member m = members_[base + k];  // a copy: stringify() may grow members_
      if (k > 0) put(',');
      appendJsonQuoted(m.key, *this);
      put(':');
      stringify(m.value);
    }
    put('}');
    members_.resize(base);
  }

  // Folds duplicate keys of members_[base, base + n) into their first
  // occurrence (with the last value) and returns the count left.
  size_t dedupe(size_t base, size_t n) {
    Member* m = members_.data() + base;
    size_t kept = 0;
    if (n <= kSmallObject) {
      for (size_t i = 0; i < n; ++i) {
        size_t j = 0;
        while (j < kept && m[j].key != m[i].key) ++j;
        if (j < kept) {
          m[j].value = m[i].value;
        } else {
          m[kept++] = m[i];
        }
      }
    } else {
      std::unordered_map<std::string_view, size_t> seen;
      seen.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        auto [it, fresh] = seen.emplace(m[i].key, kept);
        if (fresh) {
          m[kept++] = m[i];
        } else {
          m[it->second].value = m[i].value;
        }
      }
    }
    members_.resize(base + kept);
    return kept;
  }

  PromptHasher& hasher_;
  std::vector<Member>& members_;
};

}  // namespace

void ScanResult::clear() {
  outcome = ScanOutcome::kOk;
  code = ScanCode::kInvalidJson;
  param = ScanParam::kNone;
  message.clear();
  fallback = ScanFallback::kNone;
  model.clear();
  hasUser = false;
  user.clear();
  stream = false;
  ids = ScanIds::kPrompt;
  promptIds.clear();
  bodyIds.clear();
  inputTokens = 0;
  blockTokens = 0;
  strip.clear();
}

struct RequestScanner::Impl {
  simdjson::dom::parser parser;
  std::vector<Member> members;  // TextWriter's stack of object members

  void scan(const uint8_t* bytes, size_t len, const ScanOptions& options, ScanResult& out);
  void parseFailed(const uint8_t* bytes, size_t len, simdjson::error_code error, ScanResult& out);
  bool promptText(const element& messages, TextWriter& w, ScanResult& out);
  bool contentText(size_t i, const element* content, TextWriter& w, ScanResult& out);
};

namespace {

void fail(ScanResult& out, ScanCode code, ScanParam param, std::string message) {
  out.outcome = ScanOutcome::kError;
  out.code = code;
  out.param = param;
  out.message = std::move(message);
}

void syntax(ScanResult& out, const char* detail) {
  fail(out, ScanCode::kInvalidJson, ScanParam::kNone, std::string("the request body is not valid JSON: ") + detail);
}

void fallBack(ScanResult& out, ScanFallback why) {
  out.outcome = ScanOutcome::kFallback;
  out.fallback = why;
}

// invalidType() of src/core/errors.ts: "<field> must be <expected>, got <value>".
void invalidType(ScanResult& out, const std::string& field, const char* expected, const element* got) {
  fail(out, ScanCode::kInvalidField, ScanParam::kMessages, field + " must be " + expected + ", got " + describe(got));
}

}  // namespace

void RequestScanner::Impl::parseFailed(const uint8_t* bytes, size_t len, simdjson::error_code error, ScanResult& out) {
  // Invalid UTF-8 is reported first, whatever else is wrong (both paths).
  if (!simdjson::validate_utf8(reinterpret_cast<const char*>(bytes), len)) {
    fail(out, ScanCode::kInvalidJson, ScanParam::kNone, "the request body is not valid UTF-8");
    return;
  }
  switch (error) {
    case simdjson::NUMBER_ERROR:
    case simdjson::BIGINT_ERROR:
      if (hasMalformedNumber(bytes, len)) {
        syntax(out, "a malformed number");
      } else {
        fallBack(out, ScanFallback::kNumberRange);
      }
      return;
    case simdjson::STRING_ERROR:
      if (hasMalformedEscape(bytes, len)) {
        syntax(out, "a malformed escape in a string");
      } else {
        fallBack(out, ScanFallback::kLoneSurrogate);
      }
      return;
    case simdjson::DEPTH_ERROR:
      syntax(out, "it nests deeper than 1024 levels");
      return;
    case simdjson::CAPACITY:
    case simdjson::MEMALLOC:
      fallBack(out, ScanFallback::kResources);
      return;
    case simdjson::EMPTY:
      syntax(out, "no value");
      return;
    case simdjson::UNCLOSED_STRING:
      syntax(out, "an unterminated string");
      return;
    case simdjson::UNESCAPED_CHARS:
      syntax(out, "a control character in a string");
      return;
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR:
      syntax(out, "an unknown literal");
      return;
    default:
      syntax(out, "a missing or extra comma, colon, bracket or brace");
  }
}

bool RequestScanner::Impl::contentText(size_t i, const element* content, TextWriter& w, ScanResult& out) {
  if (content == nullptr) return true;
  switch (content->type()) {
    case element_type::NULL_VALUE:
      return true;
    case element_type::STRING:
      w.text(content->get_string().value_unsafe());
      return true;
    case element_type::ARRAY:
      break;
    default:
      invalidType(out, "messages[" + std::to_string(i) + "].content", "a string, an array of parts or null", content);
      return false;
  }
  bool first = true;
  for (element part : arrayOf(*content)) {
    if (!first) w.put(kUS);
    first = false;
    // A text part: an object whose (last) type is "text" and text a string.
    if (part.type() == element_type::OBJECT) {
      const element* type = nullptr;
      const element* text = nullptr;
      element typeValue;
      element textValue;
      for (auto field : objectOf(part)) {
        if (keyIs(field.key, "type")) {
          typeValue = field.value;
          type = &typeValue;
        } else if (keyIs(field.key, "text")) {
          textValue = field.value;
          text = &textValue;
        }
      }
      if (type != nullptr && text != nullptr && type->type() == element_type::STRING &&
          type->get_string().value_unsafe() == "text" && text->type() == element_type::STRING) {
        w.text(text->get_string().value_unsafe());
        continue;
      }
    }
    w.stringify(part);
  }
  return true;
}

bool RequestScanner::Impl::promptText(const element& messages, TextWriter& w, ScanResult& out) {
  size_t i = 0;
  for (element m : arrayOf(messages)) {
    const std::string field = "messages[" + std::to_string(i) + "]";
    if (m.type() != element_type::OBJECT) {
      invalidType(out, field, "an object", &m);
      return false;
    }
    element values[5];
    const element* role = nullptr;
    const element* content = nullptr;
    const element* name = nullptr;
    const element* toolCallId = nullptr;
    const element* toolCalls = nullptr;
    for (auto f : objectOf(m)) {
      if (keyIs(f.key, "role")) {
        values[0] = f.value;
        role = &values[0];
      } else if (keyIs(f.key, "content")) {
        values[1] = f.value;
        content = &values[1];
      } else if (keyIs(f.key, "name")) {
        values[2] = f.value;
        name = &values[2];
      } else if (keyIs(f.key, "tool_call_id")) {
        values[3] = f.value;
        toolCallId = &values[3];
      } else if (keyIs(f.key, "tool_calls")) {
        values[4] = f.value;
        toolCalls = &values[4];
      }
    }
    if (role == nullptr || role->type() != element_type::STRING) {
      invalidType(out, field + ".role", "a string", role);
      return false;
    }
    w.put(kRS);
    w.text(role->get_string().value_unsafe());
    w.put(kUS);
    if (!contentText(i, content, w, out)) return false;
    if (name != nullptr) {
      if (name->type() != element_type::STRING) {
        invalidType(out, field + ".name", "a string", name);
        return false;
      }
      w.put(kUS);
      w.text("name=");
      w.text(name->get_string().value_unsafe());
    }
    if (toolCallId != nullptr) {
      if (toolCallId->type() != element_type::STRING) {
        invalidType(out, field + ".tool_call_id", "a string", toolCallId);
        return false;
      }
      w.put(kUS);
      w.text("tool_call_id=");
      w.text(toolCallId->get_string().value_unsafe());
    }
    if (toolCalls != nullptr && toolCalls->type() != element_type::NULL_VALUE) {
      w.put(kUS);
      w.stringify(*toolCalls);
    }
    ++i;
  }
  return true;
}

void RequestScanner::Impl::scan(const uint8_t* bytes, size_t len, const ScanOptions& options, ScanResult& out) {
  out.clear();
  // simdjson skips a UTF-8 byte-order mark; JSON.parse does not.
  if (len >= 3 && std::memcmp(bytes, "\xEF\xBB\xBF", 3) == 0) {
    syntax(out, "a byte-order mark before the value");
    return;
  }
  element root;
  const simdjson::error_code error = parser.parse(bytes, len).get(root);
  if (error != simdjson::SUCCESS) {
    parseFailed(bytes, len, error, out);
    return;
  }
  if (root.type() != element_type::OBJECT) {
    fail(out, ScanCode::kInvalidJson, ScanParam::kNone, "the request body must be a JSON object");
    return;
  }

  // The members routing reads, the last of each name winning (JSON.parse).
  element values[6];
  const element* model = nullptr;
  const element* stream = nullptr;
  const element* user = nullptr;
  const element* messages = nullptr;
  const element* prompt = nullptr;
  const element* hashIds = nullptr;
  std::vector<bool> drop;  // per top-level member, for strip
  for (auto f : objectOf(root)) {
    bool isHashIds = false;
    if (keyIs(f.key, "model")) {
      values[0] = f.value;
      model = &values[0];
    } else if (keyIs(f.key, "stream")) {
      values[1] = f.value;
      stream = &values[1];
    } else if (keyIs(f.key, "user")) {
      values[2] = f.value;
      user = &values[2];
    } else if (keyIs(f.key, "messages")) {
      values[3] = f.value;
      messages = &values[3];
    } else if (keyIs(f.key, "prompt")) {
      values[4] = f.value;
      prompt = &values[4];
    } else if (keyIs(f.key, "hash_ids")) {
      values[5] = f.value;
      hashIds = &values[5];
      isHashIds = true;
    }
    if (options.stripRanges) drop.push_back(isHashIds);
  }

  // parseRequest's checks, in its order, with its messages.
  if (model == nullptr) {
    fail(out, ScanCode::kMissingField, ScanParam::kModel,
         "model is required: the model to use, as /v1/models lists it");
    return;
  }
  if (model->type() != element_type::STRING || model->get_string().value_unsafe().empty()) {
    fail(out, ScanCode::kInvalidField, ScanParam::kModel, "model must be a non-empty string");
    return;
  }
  if (options.endpoint == ScanEndpoint::kChat) {
    if (messages == nullptr) {
      fail(out, ScanCode::kMissingField, ScanParam::kMessages, "messages is required: a list of chat messages");
      return;
    }
    if (messages->type() != element_type::ARRAY) {
      fail(out, ScanCode::kInvalidField, ScanParam::kMessages, "messages must be an array of chat messages");
      return;
    }
  } else {
    if (prompt == nullptr || prompt->type() == element_type::NULL_VALUE) {
      fail(out, ScanCode::kMissingField, ScanParam::kPrompt, "prompt is required: the text (or token ids) to complete");
      return;
    }
    if (prompt->type() != element_type::STRING && prompt->type() != element_type::ARRAY) {
      fail(out, ScanCode::kInvalidField, ScanParam::kPrompt, "prompt must be a string or an array");
      return;
    }
  }

  if (hashIds != nullptr) {
    if (hashIds->type() != element_type::ARRAY) {
      fail(out, ScanCode::kInvalidField, ScanParam::kHashIds, "hash_ids must be an array of integers in [0, 2^53)");
      return;
    }
    for (element id : arrayOf(*hashIds)) {
      const double x = isNumber(id.type()) ? numberOf(id) : -1;
      // Number.isSafeInteger(x) && x >= 0; -0 is the id 0.
      if (!(x >= 0 && x <= kMaxSafeInteger && x == std::floor(x))) {
        out.bodyIds.clear();
        fail(out, ScanCode::kInvalidField, ScanParam::kHashIds, "hash_ids must be an array of integers in [0, 2^53)");
        return;
      }
      out.bodyIds.push_back(x == 0 ? 0.0 : x);
    }
    out.ids = ScanIds::kBody;
  } else {
    PromptHasher hasher(options.chunkBytes, out.promptIds, kScanMaxIds);
    TextWriter w(hasher, members);
    const bool chat = options.endpoint == ScanEndpoint::kChat;
    if (chat) {
      if (!promptText(*messages, w, out)) {
        out.promptIds.clear();
        return;
      }
    } else if (prompt->type() == element_type::STRING) {
      w.text(prompt->get_string().value_unsafe());
    } else if (!w.join(*prompt)) {
      out.promptIds.clear();
      fail(out, ScanCode::kInvalidField, ScanParam::kPrompt,
           "prompt cannot be converted to text: an object in it has a toString member");
      return;
    }
    hasher.finish();
    if (hasher.overflowed()) {
      out.promptIds.clear();
      fail(out, ScanCode::kInvalidField, chat ? ScanParam::kMessages : ScanParam::kPrompt,
           "prompt is too long: more than 16777215 blocks");
      return;
    }
    out.ids = ScanIds::kPrompt;
    out.inputTokens = std::ceil(static_cast<double>(hasher.bytes()) / 4);
    out.blockTokens = static_cast<double>(options.chunkBytes) / 4;
  }

  const std::string_view modelText = model->get_string().value_unsafe();
  out.model.assign(modelText.data(), modelText.size());
  if (user != nullptr && user->type() == element_type::STRING && !user->get_string().value_unsafe().empty()) {
    const std::string_view u = user->get_string().value_unsafe();
    out.hasUser = true;
    out.user.assign(u.data(), u.size());
  }
  out.stream = stream != nullptr && stream->type() == element_type::BOOL && stream->get_bool().value_unsafe();
  if (options.stripRanges && hashIds != nullptr) stripRanges(bytes, len, drop, out.strip);
}

RequestScanner::RequestScanner() : impl_(std::make_unique<Impl>()) {}
RequestScanner::~RequestScanner() = default;

void RequestScanner::scan(const uint8_t* bytes, size_t len, const ScanOptions& options, ScanResult& out) {
  impl_->scan(bytes, len, options, out);
}

void RequestScanner::release() {
  impl_->parser = simdjson::dom::parser();
  impl_->members = std::vector<Member>();
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

std::string scanKernel() { return simdjson::get_active_implementation()->name(); }

}  // namespace kvroute
