// request-scan-fuzz — libFuzzer target for the request scanner
// (scan/request-scan.h): arbitrary bytes as a completion request body.
//
// Input: byte 0 chooses the options (bit 0: completions, else chat; bit 1:
// strip ranges; bits 2-4: chunkBytes from kChunks), the rest is the body.
// test/scan-corpus-differential.test.ts decodes the corpus the same way and
// compares each file's result with the JavaScript path's; this target checks
// what holds without JavaScript:
//   * the outcome is one of the three, with an error's message non-empty and
//     its code/param pair one parseRequest can produce;
//   * a second scan with the same scanner, a scan by a fresh one, and one by a
//     scanner that just read a longer body starting with this one, give the
//     same result (no state leaks from one body to the next);
//   * kOk with prompt ids: blockTokens = chunkBytes / 4, and the id count is
//     ceil(text bytes / chunkBytes), text bytes taken from a scan with
//     chunkBytes 1 (one id per byte), whose inputTokens must equal this one's;
//   * kOk with body ids: each an integer in [0, 2^53);
//   * kOk: a priority is an integer (never -0), an output cap a non-negative
//     integer (never -0), and neither has a value when absent; an error
//     naming priority says what it must be;
//   * strip ranges ascending, disjoint, inside the body, and the body minus
//     them scans kOk with the same model, user, stream, priority and output
//     cap and no hash_ids (or fails on its messages or prompt, which hash_ids
//     spared from hashing).
// Any sanitizer report (ASan, UBSan) is a finding too.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz-input.h"
#include "scan/json-bytes.h"
#include "scan/request-scan.h"

namespace {

using kvroute::RequestScanner;
using kvroute::ScanCode;
using kvroute::ScanEndpoint;
using kvroute::ScanIds;
using kvroute::ScanOptions;
using kvroute::ScanOutcome;
using kvroute::ScanParam;
using kvroute::ScanResult;
using kvroute::fuzz::require;

// The chunk sizes byte 0 chooses from (test/scan-corpus-differential.test.ts has the same list).
constexpr size_t kChunks[8] = {128, 16, 1, 7, 4096, 64, 3, 128};

bool sameResult(const ScanResult& a, const ScanResult& b) {
  return a.outcome == b.outcome && a.code == b.code && a.param == b.param && a.message == b.message &&
         a.fallback == b.fallback && a.model == b.model && a.hasUser == b.hasUser && a.user == b.user &&
         a.stream == b.stream && a.hasPriority == b.hasPriority && a.priority == b.priority &&
         a.hasMaxTokens == b.hasMaxTokens && a.maxTokens == b.maxTokens && a.ids == b.ids &&
         a.promptIds == b.promptIds && a.bodyIds == b.bodyIds && a.inputTokens == b.inputTokens &&
         a.blockTokens == b.blockTokens && a.strip == b.strip;
}

void checkError(const ScanResult& r) {
  require(!r.message.empty(), "an error without a message");
  switch (r.code) {
    case ScanCode::kInvalidJson:
      require(r.param == ScanParam::kNone, "invalid_json names a param");
      break;
    case ScanCode::kMissingField:
      require(r.param == ScanParam::kModel || r.param == ScanParam::kMessages || r.param == ScanParam::kPrompt,
              "missing_field names no required field");
      break;
    case ScanCode::kInvalidField:
      require(r.param != ScanParam::kNone, "invalid_field names no field");
      require(r.param != ScanParam::kPriority || r.message.rfind("priority must be an integer", 0) == 0,
              "a priority error that does not say what priority must be");
      break;
  }
}

void checkStrip(const uint8_t* body, size_t len, const ScanOptions& options, const ScanResult& r,
                RequestScanner& scanner) {
  size_t previousEnd = 0;
  for (size_t i = 0; i < r.strip.size(); i += 2) {
    require(i + 1 < r.strip.size(), "an odd number of strip offsets");
    require(r.strip[i] >= previousEnd && r.strip[i] < r.strip[i + 1] && r.strip[i + 1] <= len,
            "strip ranges not ascending, disjoint and inside the body");
    previousEnd = r.strip[i + 1];
  }
  std::vector<uint8_t> stripped(len);
  stripped.resize(kvroute::copyStripped(body, len, r.strip, stripped.data()));
  ScanResult again;
  scanner.scan(stripped.data(), stripped.size(), options, again);
  // Without hash_ids the prompt is hashed, so its messages or prompt are checked, which a body
  // with hash_ids skips (parseRequest does the same): only such an error may appear.
  if (again.outcome == ScanOutcome::kError) {
    require(again.code == ScanCode::kInvalidField &&
                (again.param == ScanParam::kMessages || again.param == ScanParam::kPrompt),
            "the stripped body fails other than on its prompt");
    return;
  }
  require(again.outcome == ScanOutcome::kOk, "the stripped body falls back");
  require(again.ids == ScanIds::kPrompt, "the stripped body still has hash_ids");
  require(again.model == r.model && again.hasUser == r.hasUser && again.user == r.user && again.stream == r.stream,
          "the stripped body routes differently");
  require(again.hasPriority == r.hasPriority && again.priority == r.priority && again.hasMaxTokens == r.hasMaxTokens &&
              again.maxTokens == r.maxTokens,
          "the stripped body has another priority or output cap");
}

void checkPromptIds(const uint8_t* body, size_t len, ScanOptions options, const ScanResult& r,
                    RequestScanner& scanner) {
  const size_t chunkBytes = options.chunkBytes;
  require(r.blockTokens == static_cast<double>(chunkBytes) / 4, "blockTokens is not chunkBytes / 4");
  options.stripRanges = false;
  options.chunkBytes = 1;
  ScanResult perByte;
  scanner.scan(body, len, options, perByte);
  require(perByte.outcome == ScanOutcome::kOk && perByte.ids == ScanIds::kPrompt, "chunkBytes 1 changes the outcome");
  const size_t textBytes = perByte.promptIds.size();
  require(perByte.inputTokens == std::ceil(static_cast<double>(textBytes) / 4), "inputTokens is not ceil(bytes / 4)");
  require(perByte.inputTokens == r.inputTokens, "inputTokens depends on chunkBytes");
  require(r.promptIds.size() == (textBytes + chunkBytes - 1) / chunkBytes,
          "the id count is not ceil(text bytes / chunkBytes)");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kvroute::fuzz::FuzzInput in(data, size);
  const uint8_t choice = in.byte();
  ScanOptions options;
  options.endpoint = (choice & 1) != 0 ? ScanEndpoint::kCompletions : ScanEndpoint::kChat;
  options.stripRanges = (choice & 2) != 0;
  options.chunkBytes = kChunks[(choice >> 2) & 7];
  size_t len = 0;
  const uint8_t* body = in.bytes(in.left(), &len);

  static RequestScanner scanner;  // reused across inputs, as the proxy reuses its thread's scanner
  ScanResult first;
  scanner.scan(body, len, options, first);
  ScanResult second;
  scanner.scan(body, len, options, second);
  require(sameResult(first, second), "a second scan of the same body differs");
  RequestScanner fresh;
  ScanResult third;
  fresh.scan(body, len, options, third);
  require(sameResult(first, third), "a fresh scanner differs from a used one");
  // What a longer body leaves behind in the scanner (simdjson's buffers, and the bytes past this
  // body's end in them) must not change the answer either: scan the body followed by more
  // members and closers first (regressions/request-scan/stale-padding-*), then the body alone.
  std::vector<uint8_t> longer(body, body + len);
  const char kTail[] = ",1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]}";
  longer.insert(longer.end(), kTail, kTail + sizeof kTail - 1);
  RequestScanner dirtied;
  ScanResult scratch;
  dirtied.scan(longer.data(), longer.size(), options, scratch);
  ScanResult fourth;
  dirtied.scan(body, len, options, fourth);
  require(sameResult(first, fourth), "a scanner that read a longer body first answers differently");

  switch (first.outcome) {
    case ScanOutcome::kError:
      checkError(first);
      break;
    case ScanOutcome::kFallback:
      require(first.fallback != kvroute::ScanFallback::kNone, "a fallback without a reason");
      break;
    case ScanOutcome::kOk:
      require(!first.model.empty(), "ok without a model");
      require(first.hasUser == !first.user.empty(), "hasUser disagrees with user");
      // A priority or cap is an integer, never -0 (JSON.parse's value, normalised as the JavaScript path does).
      require(!first.hasPriority || (first.priority == std::floor(first.priority) &&
                                     !(first.priority == 0 && std::signbit(first.priority))),
              "a priority that is not an integer, or -0");
      require(first.hasPriority || first.priority == 0, "an absent priority with a value");
      require(!first.hasMaxTokens || (first.maxTokens >= 0 && first.maxTokens == std::floor(first.maxTokens) &&
                                      !std::signbit(first.maxTokens)),
              "an output cap that is not a non-negative integer, or -0");
      require(first.hasMaxTokens || first.maxTokens == 0, "an absent output cap with a value");
      if (first.ids == ScanIds::kBody) {
        for (const double id : first.bodyIds)
          require(id >= 0 && id <= 9007199254740991.0 && id == std::floor(id), "a body id out of range");
        require(first.promptIds.empty(), "body ids with prompt ids");
        if (options.stripRanges) require(!first.strip.empty(), "hash_ids present but nothing to strip");
        if (!first.strip.empty()) checkStrip(body, len, options, first, scanner);
      } else {
        require(first.strip.empty(), "strip ranges without hash_ids");
        checkPromptIds(body, len, options, first, scanner);
      }
      break;
  }
  return 0;
}
