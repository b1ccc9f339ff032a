// Request-scanner phases of core-test. scan-directed: formatJsNumber against
// JavaScript's String(x), describeJsString, PromptHasher against
// hashPromptBlocks under random splits. scan: request-scan over generated
// bodies with random byte mutations (truncation, flips, insertions): the
// outcome is always one of the three, a strip leaves a body that scans ok with
// the same model, priority and output cap and no hash_ids, and the sanitizers
// stay quiet on every error path (exact results are test/request-scan.test.ts's
// job).
#include <cstdint>
#include <string>
#include <vector>

#include "harness.h"
#include "hash/prompt-hash.h"
#include "phases.h"
#include "rng.h"
#include "scan/json-bytes.h"
#include "scan/json-text.h"
#include "scan/request-scan.h"

namespace core_test {

void scanDirectedCases() {
  struct Case {
    double x;
    const char* js;
  };
  const Case cases[] = {
      {0.0, "0"},
      {-0.0, "0"},
      {1e21, "1e+21"},
      {-1e21, "-1e+21"},
      {1e20, "100000000000000000000"},
      {123456789012345680000.0, "123456789012345680000"},
      {1e-7, "1e-7"},
      {2.5e-7, "2.5e-7"},
      {1e-6, "0.000001"},
      {1.5e-6, "0.0000015"},
      {123e-20, "1.23e-18"},
      {0.1, "0.1"},
      {-1.5, "-1.5"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {9007199254740993.0, "9007199254740992"},
      {4.35, "4.35"},
      {0.000001234, "0.000001234"},
      {100, "100"},
      {1.5e300, "1.5e+300"},
  };
  for (const Case& c : cases) {
    char buf[kvroute::kJsNumberMaxChars];
    const std::string got(buf, kvroute::formatJsNumber(c.x, buf));
    ++g.step;
    CHECK(got == c.js, "formatJsNumber(" << c.js << ") = " << got);
  }
  CHECK(kvroute::describeJsString("abc") == "\"abc\"", "describe abc");
  // 39 x then an astral character: the cut falls inside its surrogate pair.
  CHECK(kvroute::describeJsString(std::string(39, 'x') + "\xF0\x9F\x98\x80tail") ==
            "\"" + std::string(39, 'x') + "\\ud83d\xE2\x80\xA6\"",
        "describe of a cut surrogate pair");
  Rng rng(99);
  for (int round = 0; round < 200; ++round) {
    ++g.step;
    std::string text(rng.below(3000), '\0');
    for (char& c : text) c = static_cast<char>(rng.below(256));
    const size_t chunk = 1 + rng.below(300);
    std::vector<uint64_t> whole(kvroute::promptBlockCount(text.size(), chunk));
    kvroute::hashPromptBlocks(reinterpret_cast<const uint8_t*>(text.data()), text.size(), chunk, whole.data());
    std::vector<uint64_t> pieces;
    kvroute::PromptHasher hasher(chunk, pieces);
    for (size_t at = 0; at < text.size();) {
      const size_t n = std::min<size_t>(text.size() - at, rng.below(2 * chunk + 2));
      hasher.append(text.data() + at, n);
      at += n;
    }
    hasher.finish();
    CHECK(pieces == whole,
          "PromptHasher differs from hashPromptBlocks: chunk " << chunk << ", " << text.size() << " bytes");
  }
}

namespace {

std::string scanBody(Rng& rng) {
  static const std::vector<std::string> values = {"\"x\\u00e9\\n\xF0\x9F\x98\x80\"",
                                                  "1e21",
                                                  "-0",
                                                  "0.1",
                                                  "5e-324",
                                                  "[1,{\"2\":1,\"1\":2,\"1\":3}]",
                                                  "null",
                                                  "{\"type\":\"text\",\"text\":\"t\"}",
                                                  "true",
                                                  "\"\\ud83d\\ude00\"",
                                                  "[]",
                                                  "{}",
                                                  "123456789012345678"};
  auto some = [&]() {
    std::string out;
    const uint64_t n = rng.below(5);
    for (uint64_t k = 0; k < n; ++k) out += (k ? "," : "") + rng.pick(values);
    return out;
  };
  std::string members = "\"model\":\"m\"";
  if (rng.percent(50)) {
    members += ",\"messages\":[{\"role\":\"user\",\"content\":[" + some() + "],\"tool_calls\":[" + some() +
               "],\"name\":\"n\"}]";
  } else {
    members += ",\"prompt\":[" + some() + "]";
  }
  // Flow control's fields, with every kind of value (an integer, a float, a string, null, ...).
  if (rng.percent(30)) members += ",\"priority\":" + rng.pick(values);
  if (rng.percent(30))
    members += std::string(rng.percent(50) ? ",\"max_tokens\":" : ",\"max_completion_tokens\":") + rng.pick(values);
  const uint64_t ids = rng.below(4);
  for (uint64_t k = 0; k < ids; ++k) {
    const std::string member = std::string(rng.percent(50) ? " " : "") + "\"hash_ids\" :[1, 2]";
    members = rng.percent(50) ? member + "," + members : members + " ,\n" + member;
  }
  return "{" + members + "}";
}

}  // namespace

void scanPhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0x5CA9ULL + 3);
  kvroute::RequestScanner scanner;
  kvroute::ScanResult r;
  kvroute::ScanResult again;
  for (uint32_t op = 0; op < ops; ++op) {
    ++g.step;
    std::string body = scanBody(rng);
    const bool mutated = rng.percent(60);
    if (mutated && !body.empty()) {
      const size_t at = rng.below(body.size());
      switch (rng.below(3)) {
        case 0:
          body.resize(at);
          break;
        case 1:
          body[at] = static_cast<char>(rng.below(256));
          break;
        default:
          body.insert(at, 1, "\"\\{}[],:-0e.\xFF"[rng.below(14)]);
      }
    }
    kvroute::ScanOptions options;
    options.endpoint = rng.percent(50) ? kvroute::ScanEndpoint::kChat : kvroute::ScanEndpoint::kCompletions;
    options.chunkBytes = 1 + rng.below(200);
    options.stripRanges = rng.percent(70);
    const auto* bytes = reinterpret_cast<const uint8_t*>(body.data());
    scanner.scan(bytes, body.size(), options, r);
    note("scan " + body);
    CHECK(r.outcome == kvroute::ScanOutcome::kOk || r.outcome == kvroute::ScanOutcome::kError ||
              r.outcome == kvroute::ScanOutcome::kFallback,
          "outcome");
    if (r.outcome != kvroute::ScanOutcome::kOk || r.strip.empty()) continue;
    size_t last = 0;
    for (size_t k = 0; k < r.strip.size(); k += 2) {
      CHECK(r.strip[k] >= last && r.strip[k] < r.strip[k + 1] && r.strip[k + 1] <= body.size(), "strip ranges");
      last = r.strip[k + 1];
    }
    std::string stripped(body.size(), '\0');
    stripped.resize(kvroute::copyStripped(bytes, body.size(), r.strip, reinterpret_cast<uint8_t*>(stripped.data())));
    scanner.scan(reinterpret_cast<const uint8_t*>(stripped.data()), stripped.size(), options, again);
    note("stripped " + stripped);
    // The prompt, unchecked beside hash_ids, may now be refused; the JSON may not.
    const bool refused = again.outcome == kvroute::ScanOutcome::kError &&
                         again.code != kvroute::ScanCode::kInvalidJson && again.param != kvroute::ScanParam::kHashIds;
    const bool scanned = again.outcome == kvroute::ScanOutcome::kOk && again.ids == kvroute::ScanIds::kPrompt &&
                         again.strip.empty() && again.model == r.model && again.hasPriority == r.hasPriority &&
                         again.priority == r.priority && again.maxTokens == r.maxTokens;
    CHECK(refused || scanned, "the stripped body does not scan as the body without hash_ids");
    ++totals.removed;
  }
  totals.ops += ops;
}

}  // namespace core_test
