#include "scan/request-scan.h"

#include <cmath>
#include <cstring>
#include <string_view>

#include "hash/prompt-hash.h"
#include "scan/dom-text.h"
#include "scan/json-bytes.h"
#include "scan/json-text.h"

namespace kvroute {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

constexpr char kRS = '\x1e';
constexpr char kUS = '\x1f';
constexpr double kMaxSafeInteger = 9007199254740991.0;  // 2^53 - 1

bool keyIs(std::string_view key, std::string_view name) { return key == name; }

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
  hasPriority = false;
  priority = 0;
  hasMaxTokens = false;
  maxTokens = 0;
  ids = ScanIds::kPrompt;
  promptIds.clear();
  bodyIds.clear();
  inputTokens = 0;
  blockTokens = 0;
  strip.clear();
}

struct RequestScanner::Impl {
  simdjson::dom::parser parser;
  // The body with SIMDJSON_PADDING zero bytes after it, reused (see scan()).
  std::vector<uint8_t> padded;
  std::vector<DomTextWriter::Member> members;  // DomTextWriter's stack of object members

  void scan(const uint8_t* bytes, size_t len, const ScanOptions& options, ScanResult& out);
  void parseFailed(const uint8_t* bytes, size_t len, simdjson::error_code error, ScanResult& out);
  bool promptText(const element& messages, DomTextWriter& w, ScanResult& out);
  bool contentText(size_t i, const element* content, DomTextWriter& w, ScanResult& out);
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

// Number.isInteger(x) of a parsed number: simdjson's are finite (a magnitude beyond double falls back).
bool isIntegral(const element& e, double& x) {
  if (!isNumber(e.type())) return false;
  x = numberOf(e);
  if (!(x == std::floor(x))) return false;
  if (x == 0) x = 0;  // -0 is 0
  return true;
}

// readPriority() of src/proxy/exchange/request-inputs.ts: absent or null is no priority; an
// integer is kept; anything else is refused naming the field.
bool readPriority(const element* priority, ScanResult& out) {
  if (priority == nullptr || priority->type() == element_type::NULL_VALUE) return true;
  double x = 0;
  if (!isIntegral(*priority, x)) {
    fail(out, ScanCode::kInvalidField, ScanParam::kPriority,
         "priority must be an integer (lower is handled earlier), got " + describe(priority));
    return false;
  }
  out.hasPriority = true;
  out.priority = x;
  return true;
}

// readMaxTokens() of request-inputs.ts: vLLM's cap is, for chat, max_completion_tokens unless it is
// absent or null, else max_tokens, and for completions max_tokens alone; used when a non-negative
// integer, else ignored (the engine judges it).
void readMaxTokens(ScanEndpoint endpoint, const element* maxCompletionTokens, const element* maxTokens,
                   ScanResult& out) {
  const bool completionCap = endpoint == ScanEndpoint::kChat && maxCompletionTokens != nullptr &&
                             maxCompletionTokens->type() != element_type::NULL_VALUE;
  const element* cap = completionCap ? maxCompletionTokens : maxTokens;
  double x = 0;
  if (cap == nullptr || !isIntegral(*cap, x) || x < 0) return;
  out.hasMaxTokens = true;
  out.maxTokens = x;
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

bool RequestScanner::Impl::contentText(size_t i, const element* content, DomTextWriter& w, ScanResult& out) {
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

bool RequestScanner::Impl::promptText(const element& messages, DomTextWriter& w, ScanResult& out) {
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
  // simdjson skips a UTF-8 byte-order mark; JSON.parse does not. Invalid UTF-8 after it is still
  // reported first, as everywhere (regressions/request-scan/bom-then-invalid-utf8).
  if (len >= 3 && std::memcmp(bytes, "\xEF\xBB\xBF", 3) == 0) {
    if (!simdjson::validate_utf8(reinterpret_cast<const char*>(bytes), len)) {
      fail(out, ScanCode::kInvalidJson, ScanParam::kNone, "the request body is not valid UTF-8");
    } else {
      syntax(out, "a byte-order mark before the value");
    }
    return;
  }
  // An empty typed array's data pointer is null (a zero-length Uint8Array from JavaScript), and a
  // memcpy's source (the copy below, parseFailed's) must never be null, even for 0 bytes.
  static constexpr uint8_t kNoBytes[1] = {0};
  if (len == 0) bytes = kNoBytes;
  // The parser is handed a copy of our own, zero-padded on every call: simdjson's copy
  // (parse(bytes, len) reallocating) reuses its buffer without clearing what lies past the body,
  // and on an unbalanced document its stage 2 reads the bytes at the body's end, so a longer body
  // scanned before could turn a syntax error into a number-range fallback (found by
  // native/fuzz/request-scan-fuzz.cc; native/fuzz/regressions/request-scan/).
  if (padded.size() < len + simdjson::SIMDJSON_PADDING) padded.resize(len + simdjson::SIMDJSON_PADDING);
  if (len > 0) std::memcpy(padded.data(), bytes, len);
  std::memset(padded.data() + len, 0, simdjson::SIMDJSON_PADDING);
  element root;
  const simdjson::error_code error = parser.parse(padded.data(), len, false).get(root);
  if (error != simdjson::SUCCESS) {
    parseFailed(bytes, len, error, out);
    return;
  }
  if (root.type() != element_type::OBJECT) {
    fail(out, ScanCode::kInvalidJson, ScanParam::kNone, "the request body must be a JSON object");
    return;
  }

  // The members routing reads, the last of each name winning (JSON.parse).
  element values[9];
  const element* model = nullptr;
  const element* stream = nullptr;
  const element* user = nullptr;
  const element* messages = nullptr;
  const element* prompt = nullptr;
  const element* hashIds = nullptr;
  const element* priority = nullptr;
  const element* maxTokens = nullptr;
  const element* maxCompletionTokens = nullptr;
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
    } else if (keyIs(f.key, "priority")) {
      values[6] = f.value;
      priority = &values[6];
    } else if (keyIs(f.key, "max_tokens")) {
      values[7] = f.value;
      maxTokens = &values[7];
    } else if (keyIs(f.key, "max_completion_tokens")) {
      values[8] = f.value;
      maxCompletionTokens = &values[8];
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

  // Before hash_ids and the prompt's own checks, as parseRequest then hashParsedRequest.
  if (!readPriority(priority, out)) return;
  readMaxTokens(options.endpoint, maxCompletionTokens, maxTokens, out);
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
    DomTextWriter w(hasher, members);
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
  impl_->padded = std::vector<uint8_t>();
  impl_->members = std::vector<DomTextWriter::Member>();
}

std::string scanKernel() { return simdjson::get_active_implementation()->name(); }

}  // namespace kvroute
