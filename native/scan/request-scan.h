// request-scan — one pass from a completion request's raw body bytes to what
// routing and forwarding need, without building a JavaScript object.
//
// Why it exists: the proxy's JavaScript path (src/proxy/exchange/request-inputs.ts,
// parseRequest, then promptText and the router's prompt hashing) runs
// JSON.parse on the event loop; an 820 KiB agentic prompt costs it ~3 ms and a
// 50 MB one stalls every open stream for hundreds of ms. This scanner does the
// same work in C++, synchronously for small bodies or on the libuv threadpool
// (js-request-scan.h), and must give exactly the JavaScript path's answer.
//
// Algorithm:
//   1. simdjson's DOM parser validates the whole body (UTF-8 included) and
//      builds its tape; a UTF-8 byte-order mark, which simdjson skips and
//      JSON.parse rejects, is refused first.
//   2. The top-level object's members are read with JSON.parse's duplicate-key
//      rule (the last value wins): model, stream, user, messages, prompt,
//      hash_ids, priority, max_tokens, max_completion_tokens, checked in
//      parseRequest's order with its messages. priority (vLLM's: an integer,
//      lower is handled earlier) is refused unless an integer or null; the
//      output cap (vLLM's choice: for chat max_completion_tokens, else
//      max_tokens; for completions max_tokens) is kept when a non-negative
//      integer and ignored otherwise (the engine judges it); -0 is 0 in both.
//   3. Without hash_ids, the prompt text is written straight into a
//      PromptHasher, never held whole: promptText(messages) for chat (RS role
//      US content…, content parts joined by US, non-text parts and tool_calls
//      as JSON.stringify writes them), String(prompt) for completions
//      (Array.prototype.join semantics). dom-text.h writes values as V8 does
//      (json-text.h: numbers and strings; objects in V8's key order, array-index
//      keys first, then the others by first occurrence, last value winning).
//   4. With stripRanges and hash_ids present, a second, scalar pass over the
//      (now known valid) bytes finds the top-level members' byte spans, and
//      the ranges that drop every hash_ids member and its separating comma
//      (json-bytes.h, which also tells a malformed number or escape from one
//      JSON.parse accepts on the error path).
//
// Outcomes: kOk; kError with parseRequest's code, param and message (JSON
// syntax detail excepted); kFallback when exact fidelity would need
// JavaScript's own parser, and the caller runs the JavaScript path instead:
//   kNumberRange     a number JSON.parse accepts but simdjson cannot hold
//                    (magnitude beyond double, e.g. 1e400; an integer beyond
//                    64 bits); a malformed number is an error, not a fallback
//   kLoneSurrogate   a \u escape of an unpaired surrogate (JavaScript strings
//                    hold it, UTF-8 cannot); a malformed escape is an error
//   kResources       simdjson refused the document's size
//
// Rules shared with the JavaScript path (docs/hashing.md): invalid UTF-8 is
// refused ("the request body is not valid UTF-8"); a value deeper than
// kScanMaxDepth (1024) levels is refused as invalid JSON (the body is level 1,
// each value inside an array or object, scalars too, one level below it:
// simdjson's rule); a hash_ids value -0 is the id 0; an object with a
// toString member in a completions prompt array is an invalid field (String()
// of it throws in JavaScript).
//
// Tunables: chunkBytes (per call, the router's hashChunkBytes). Memory:
// simdjson's DOM reserves ~15 bytes of address space per input byte, touched
// only as far as the document needs (a text-heavy body: ~3 bytes per byte);
// RequestScanner keeps it for reuse until release(). Complexity: O(body) for
// the parse, O(prompt text) for hashing, O(k log k) per serialised object of
// k members (O(k^2) duplicate check below 16 members, a hash map above).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvroute {

// simdjson's maximum depth: the top-level object is level 1, every value in a
// container (scalar or not) one level deeper than the container.
constexpr size_t kScanMaxDepth = 1024;
// A request's ids become depths in a 24-bit field (BlockIndex::kMaxDepth).
constexpr size_t kScanMaxIds = (1u << 24) - 1;

enum class ScanEndpoint : uint8_t { kChat = 0, kCompletions = 1 };
enum class ScanOutcome : uint8_t { kOk = 0, kError = 1, kFallback = 2 };
// The proxy's error codes (src/proxy/server/error-body.ts), all HTTP 400.
enum class ScanCode : uint8_t { kInvalidJson = 0, kMissingField = 1, kInvalidField = 2 };
enum class ScanParam : uint8_t { kNone = 0, kModel = 1, kMessages = 2, kPrompt = 3, kHashIds = 4, kPriority = 5 };
enum class ScanFallback : uint8_t { kNone = 0, kNumberRange = 1, kLoneSurrogate = 2, kResources = 3 };
// kPrompt: promptIds hashed from the prompt text; kBody: the body's hash_ids.
enum class ScanIds : uint8_t { kPrompt = 1, kBody = 2 };

struct ScanOptions {
  ScanEndpoint endpoint = ScanEndpoint::kChat;
  size_t chunkBytes = 128;
  // Report the byte ranges that drop hash_ids (--strip-extensions).
  bool stripRanges = false;
};

struct ScanResult {
  ScanOutcome outcome = ScanOutcome::kOk;
  // kError
  ScanCode code = ScanCode::kInvalidJson;
  ScanParam param = ScanParam::kNone;
  std::string message;
  // kFallback
  ScanFallback fallback = ScanFallback::kNone;
  // kOk
  std::string model;
  bool hasUser = false;  // `user` is a non-empty string
  std::string user;
  bool stream = false;        // stream === true
  bool hasPriority = false;   // `priority` is an integer (absent or null: false)
  double priority = 0;        // integral, never -0
  bool hasMaxTokens = false;  // the output cap is a non-negative integer
  double maxTokens = 0;       // integral, >= 0, never -0
  ScanIds ids = ScanIds::kPrompt;
  std::vector<uint64_t> promptIds;
  std::vector<double> bodyIds;
  double inputTokens = 0;  // kPrompt: ceil(text bytes / 4)
  double blockTokens = 0;  // kPrompt: chunkBytes / 4
  // [start, end) byte pairs to drop, ascending and disjoint: the body minus
  // them is valid JSON equal to the body without hash_ids.
  std::vector<size_t> strip;

  void clear();
};

class RequestScanner {
 public:
  RequestScanner();
  ~RequestScanner();
  RequestScanner(const RequestScanner&) = delete;
  RequestScanner& operator=(const RequestScanner&) = delete;

  // Scans len bytes (no padding needed: the parser copies them). Never
  // throws except std::bad_alloc.
  void scan(const uint8_t* bytes, size_t len, const ScanOptions& options, ScanResult& out);
  // Frees the parser's buffers (they grow to the largest body seen).
  void release();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The simdjson kernel chosen for this CPU ("icelake", "haswell", "westmere",
// "arm64", "fallback", ...).
std::string scanKernel();

}  // namespace kvroute
