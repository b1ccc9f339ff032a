// prefix-hash-fuzz — libFuzzer target for the prefix-hash chains
// (hash/prompt-hash.h, hash/token-keys.h) and the chat prompt text the
// request scanner hashes (scan/request-scan.h).
//
// Input: byte 0 chooses chunkBytes (kChunks), byte 1 a block size (1 to 8),
// the rest is text (and, read as little-endian u32 words, tokens; and, cut at
// its bytes below 0x20, chat messages).
// Checked, each against an independent construction:
//   * text: hashPromptBlocks yields ceil(L / chunkBytes) ids; PromptHasher
//     fed the text in pieces cut where the input says gives the same ids;
//     with maxIds k it keeps the first k and reports the overflow; the ids of
//     a prefix of m whole chunks are the first m ids (an id names its prefix);
//   * tokens: hashTokenBlocks over all blocks equals the first j blocks then
//     the rest chained from key j - 1 (hasParent), and tokenBlockKey one by one;
//   * chat: a body whose messages carry the input's text as \u00XX escapes
//     (role, content string or text parts, name) scans to the ids of the text
//     built here as docs/hashing.md defines it (RS role US content…).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz-input.h"
#include "hash/prompt-hash.h"
#include "hash/token-keys.h"
#include "scan/request-scan.h"

namespace {

using kvroute::fuzz::FuzzInput;
using kvroute::fuzz::require;

constexpr size_t kChunks[8] = {128, 1, 2, 3, 7, 16, 64, 4096};

std::vector<uint64_t> promptIds(const std::string& text, size_t chunkBytes) {
  std::vector<uint64_t> ids(kvroute::promptBlockCount(text.size(), chunkBytes));
  const size_t n =
      kvroute::hashPromptBlocks(reinterpret_cast<const uint8_t*>(text.data()), text.size(), chunkBytes, ids.data());
  require(n == ids.size(), "hashPromptBlocks count is not ceil(L / chunkBytes)");
  return ids;
}

void checkText(const std::string& text, size_t chunkBytes, const uint8_t* cuts, size_t cutCount) {
  const std::vector<uint64_t> whole = promptIds(text, chunkBytes);
  // Pieces: each cut byte is the next piece's length (0 allowed: an empty append).
  std::vector<uint64_t> pieced;
  kvroute::PromptHasher hasher(chunkBytes, pieced);
  size_t at = 0;
  for (size_t c = 0; c < cutCount && at < text.size(); ++c) {
    const size_t n = std::min<size_t>(cuts[c], text.size() - at);
    hasher.append(text.data() + at, n);
    at += n;
  }
  hasher.append(text.data() + at, text.size() - at);
  hasher.finish();
  require(pieced == whole, "PromptHasher in pieces differs from hashPromptBlocks");
  require(hasher.bytes() == text.size(), "PromptHasher miscounts bytes");

  const size_t cap = whole.size() / 2;
  std::vector<uint64_t> capped;
  kvroute::PromptHasher limited(chunkBytes, capped, cap);
  limited.append(text.data(), text.size());
  limited.finish();
  require(limited.overflowed() == (whole.size() > cap), "overflowed() disagrees with the cap");
  require(std::vector<uint64_t>(whole.begin(), whole.begin() + static_cast<long>(capped.size())) == capped &&
              capped.size() == std::min(cap, whole.size()),
          "a capped hasher kept other ids than the first ones");

  const size_t m = text.size() / chunkBytes / 2;
  const std::vector<uint64_t> prefix = promptIds(text.substr(0, m * chunkBytes), chunkBytes);
  require(std::vector<uint64_t>(whole.begin(), whole.begin() + static_cast<long>(m)) == prefix,
          "a prefix's ids are not the first ids");
}

void checkTokens(const std::string& text, uint32_t blockSize) {
  std::vector<uint32_t> tokens(text.size() / 4);
  for (size_t i = 0; i < tokens.size(); ++i) {
    tokens[i] = static_cast<uint32_t>(static_cast<uint8_t>(text[4 * i])) |
                static_cast<uint32_t>(static_cast<uint8_t>(text[4 * i + 1])) << 8 |
                static_cast<uint32_t>(static_cast<uint8_t>(text[4 * i + 2])) << 16 |
                static_cast<uint32_t>(static_cast<uint8_t>(text[4 * i + 3])) << 24;
  }
  const size_t blocks = tokens.size() / blockSize;
  std::vector<uint64_t> keys(blocks + 1);
  require(kvroute::hashTokenBlocks(tokens.data(), tokens.size(), blockSize, false, 0, keys.data()) == blocks,
          "hashTokenBlocks count is not floor(n / blockSize)");
  uint64_t seed = blockSize;
  for (size_t k = 0; k < blocks; ++k) {
    seed = kvroute::tokenBlockKey(tokens.data() + k * blockSize, blockSize, seed);
    require(seed == keys[k], "tokenBlockKey one by one differs from hashTokenBlocks");
  }
  const size_t j = blocks / 2;
  if (j == 0) return;
  std::vector<uint64_t> rest(blocks - j + 1);
  const size_t more = kvroute::hashTokenBlocks(tokens.data() + j * blockSize, tokens.size() - j * blockSize, blockSize,
                                               true, keys[j - 1], rest.data());
  require(more == blocks - j, "a continued chain has the wrong count");
  for (size_t k = 0; k < more; ++k) require(rest[k] == keys[j + k], "a continued chain differs from the whole");
}

// JSON string of `bytes` as \u00XX escapes (each byte one code point below
// 256), and that string's UTF-8 text as JavaScript would hold and hash it.
void escaped(const std::string& bytes, std::string& json, std::string& utf8) {
  static const char kHex[] = "0123456789abcdef";
  json += '"';
  for (const char ch : bytes) {
    const auto b = static_cast<uint8_t>(ch);
    json += "\\u00";
    json += kHex[b >> 4];
    json += kHex[b & 15];
    if (b < 0x80) {
      utf8 += static_cast<char>(b);
    } else {
      utf8 += static_cast<char>(0xC0 | (b >> 6));
      utf8 += static_cast<char>(0x80 | (b & 0x3F));
    }
  }
  json += '"';
}

void checkChat(const std::string& text, size_t chunkBytes) {
  // Fields: the text cut at bytes below 0x04; each message takes a role, then
  // a content, a part count (the first byte of the next field) and a name.
  std::vector<std::string> fields(1);
  for (const char ch : text) {
    if (static_cast<uint8_t>(ch) < 0x04) {
      fields.emplace_back(1, ch);
    } else {
      fields.back() += ch;
    }
  }
  std::string body = "{\"model\":\"m\",\"messages\":[";
  std::string expected;
  size_t f = 0;
  for (size_t message = 0; f < fields.size(); ++message) {
    if (message > 0) body += ',';
    body += "{\"role\":";
    expected += '\x1e';
    escaped(fields[f++], body, expected);
    expected += '\x1f';
    if (f < fields.size()) {
      const std::string& content = fields[f++];
      body += ",\"content\":";
      if (!content.empty() && content[0] == '\x01') {
        // Text parts, joined by US.
        body += "[{\"type\":\"text\",\"text\":";
        escaped(content, body, expected);
        body += "},{\"text\":";
        expected += '\x1f';
        escaped(content, body, expected);
        body += ",\"type\":\"text\"}]";
      } else {
        escaped(content, body, expected);
      }
    }
    if (f < fields.size() && !fields[f].empty() && fields[f][0] == '\x02') {
      body += ",\"name\":";
      expected += "\x1fname=";
      escaped(fields[f++], body, expected);
    }
    body += '}';
  }
  body += "]}";
  kvroute::ScanOptions options;
  options.chunkBytes = chunkBytes;
  kvroute::ScanResult result;
  static kvroute::RequestScanner scanner;
  scanner.scan(reinterpret_cast<const uint8_t*>(body.data()), body.size(), options, result);
  require(result.outcome == kvroute::ScanOutcome::kOk, "a well-formed chat body did not scan");
  require(result.promptIds == promptIds(expected, chunkBytes), "the chat prompt's ids differ from its text's");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const size_t chunkBytes = kChunks[in.below(8)];
  const uint32_t blockSize = 1 + in.below(8);
  size_t n = 0;
  const uint8_t* p = in.bytes(in.left(), &n);
  const std::string text(reinterpret_cast<const char*>(p), n);
  checkText(text, chunkBytes, p, n);
  checkTokens(text, blockSize);
  checkChat(text, chunkBytes);
  return 0;
}
