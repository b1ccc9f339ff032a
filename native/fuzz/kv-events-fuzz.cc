// kv-events-fuzz — libFuzzer target for the KV-event validator and applier
// (core/event-index.h): EventIndex::validate, then apply, on packed streams
// the input describes, between in-flight holds, releases, matches, fed
// switches, clears and resets on four slots (one past the fleet mask).
//
// Input: a sequence of commands, one byte each plus its operands:
//   structured stream  records whose op, flags, count and block size come from
//                      the input (ops 0 and 4 unknown, flags and sizes at and
//                      past their limits), hashes from a pool of 16 so parents
//                      and removals meet, tokens from a vocabulary of 4; the
//                      declared lengths may then be cut short;
//   raw stream         ops, hashes and tokens words straight from the input,
//                      lengths too (within the arrays);
//   hold / release / match / fed, clear or reset.
// Each array is allocated at exactly its declared length, so a read past it
// trips AddressSanitizer. Checked: validate() never crashes and names the word
// it refuses ("packed.…"); what it accepts applies; after every command
// checkInvariants() is ""; match() writes only event-fed slots, each a count
// in [0, limit].
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/event-index.h"
#include "fuzz/fuzz-input.h"
#include "hash/token-keys.h"

namespace {

using kvroute::EventIndex;
using kvroute::PackedKvEvents;
using kvroute::fuzz::FuzzInput;
using kvroute::fuzz::require;

constexpr uint32_t kSlots[4] = {0, 1, 5, EventIndex::kMaskSlots + 2};
constexpr uint32_t kMaxRecords = 8;
constexpr uint32_t kMaxWords = 64;

uint64_t pooledHash(uint8_t choice) { return (static_cast<uint64_t>(choice % 16) + 1) * 0x9E3779B97F4A7C15ULL; }

// A copy of exactly `length` elements of `words` on the heap (AddressSanitizer
// guards its end), and its data pointer.
template <typename T>
const T* exact(const std::vector<T>& words, size_t length, std::unique_ptr<T[]>& owner) {
  owner.reset(new T[length == 0 ? 1 : length]);
  for (size_t i = 0; i < length; ++i) owner[i] = words[i];
  return owner.get();
}

struct Stream {
  std::vector<uint32_t> ops;
  std::vector<uint64_t> hashes;
  std::vector<uint32_t> tokens;
};

Stream structured(FuzzInput& in) {
  Stream s;
  const uint32_t records = in.below(kMaxRecords + 1);
  for (uint32_t r = 0; r < records; ++r) {
    const uint32_t op = in.below(5);  // 1..3 known, 0 and 4 not
    const uint8_t shape = in.byte();
    // Mostly valid flags and sizes; a high bit of `shape` asks for a bad one.
    const uint32_t flags = (shape & 0x80) != 0 ? in.byte() : (shape & 7);
    const uint32_t count = in.below(5);
    uint32_t blockSize = 1 + (shape >> 3 & 3);
    if (op == kvroute::kOpRemoved || op == kvroute::kOpCleared) blockSize = 0;
    if ((shape & 0x40) != 0) blockSize = in.integer<uint32_t>();
    s.ops.insert(s.ops.end(), {op, op == kvroute::kOpCleared && (shape & 0x20) == 0 ? 0 : flags,
                               op == kvroute::kOpCleared && (shape & 0x20) == 0 ? 0 : count, blockSize});
    // The hashes and tokens a well-formed record of this shape consumes (capped
    // so a huge block size from the input stays a length mismatch, not a huge array).
    const uint32_t hashes = op == kvroute::kOpStored    ? ((flags & kvroute::kFlagParent) != 0 ? 1 : 0) + count
                            : op == kvroute::kOpRemoved ? count
                                                        : 0;
    for (uint32_t h = 0; h < hashes; ++h) s.hashes.push_back(pooledHash(in.byte()));
    const uint64_t tokens = op == kvroute::kOpStored ? uint64_t{count} * blockSize : 0;
    for (uint64_t t = 0; t < tokens && t < kMaxWords; ++t) s.tokens.push_back(in.below(4));
  }
  return s;
}

Stream raw(FuzzInput& in) {
  Stream s;
  const uint32_t ops = in.below(kMaxWords + 1);
  for (uint32_t i = 0; i < ops; ++i) s.ops.push_back(in.integer<uint32_t>());
  const uint32_t hashes = in.below(kMaxWords / 4 + 1);
  for (uint32_t i = 0; i < hashes; ++i)
    s.hashes.push_back((in.byte() & 0x80) != 0 ? in.integer<uint64_t>() : pooledHash(in.byte()));
  const uint32_t tokens = in.below(kMaxWords + 1);
  for (uint32_t i = 0; i < tokens; ++i) s.tokens.push_back(in.integer<uint32_t>());
  return s;
}

void applyStream(EventIndex& index, uint32_t slot, const Stream& s, FuzzInput& in) {
  // Declared lengths: as built, or cut short by the input (never past the arrays).
  const uint8_t cut = in.byte();
  const size_t opsLength =
      (cut & 1) != 0 ? s.ops.size() - (s.ops.size() > 0 ? in.below(s.ops.size() + 1) : 0) : s.ops.size();
  const size_t hashesLength = (cut & 2) != 0 && !s.hashes.empty() ? in.below(s.hashes.size() + 1) : s.hashes.size();
  const size_t tokensLength = (cut & 4) != 0 && !s.tokens.empty() ? in.below(s.tokens.size() + 1) : s.tokens.size();
  std::unique_ptr<uint32_t[]> ops;
  std::unique_ptr<uint64_t[]> hashes;
  std::unique_ptr<uint32_t[]> tokens;
  PackedKvEvents p;
  p.ops = exact(s.ops, opsLength, ops);
  p.opsLength = opsLength;
  p.hashes = exact(s.hashes, hashesLength, hashes);
  p.hashesLength = hashesLength;
  p.tokens = exact(s.tokens, tokensLength, tokens);
  p.tokensLength = tokensLength;
  const std::string error = EventIndex::validate(p);
  if (!error.empty()) {
    require(error.rfind("packed.", 0) == 0, "a refusal that names no packed field");
    return;
  }
  index.apply(slot, p);
}

// Block keys of a request: tokens from the input's vocabulary of 4, chained at
// a block size of 1 to 4 (the sizes structured streams store).
std::vector<uint64_t> requestKeys(FuzzInput& in) {
  const uint32_t blockSize = 1 + in.below(4);
  std::vector<uint32_t> tokens(blockSize * in.below(9));
  for (uint32_t& t : tokens) t = in.below(4);
  std::vector<uint64_t> keys(tokens.size() / blockSize);
  kvroute::hashTokenBlocks(tokens.data(), tokens.size(), blockSize, false, 0, keys.data());
  return keys;
}

void matchAll(const EventIndex& index, FuzzInput& in) {
  const std::vector<uint64_t> keys = requestKeys(in);
  const uint32_t limit = keys.empty() ? 0 : in.below(static_cast<uint32_t>(keys.size()) + 1);
  constexpr int32_t kUntouched = -7;
  std::vector<int32_t> matched(kSlots[3] + 1, kUntouched);
  const std::unique_ptr<uint64_t[]> owner(new uint64_t[limit == 0 ? 1 : limit]);
  for (uint32_t i = 0; i < limit; ++i) owner[i] = keys[i];
  index.match(owner.get(), limit, matched.data());
  for (uint32_t s = 0; s < matched.size(); ++s) {
    if (index.fed(s)) {
      require(matched[s] >= 0 && static_cast<uint32_t>(matched[s]) <= limit, "a match outside [0, limit]");
    } else {
      require(matched[s] == kUntouched, "match() wrote a slot that is not event-fed");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  EventIndex index;
  index.ensureSlots(kSlots[3] + 1);
  index.setFed(kSlots[0], true);
  while (!in.empty()) {
    const uint32_t command = in.below(8);
    const uint32_t slot = kSlots[in.below(4)];
    switch (command) {
      case 0:
      case 1:
        applyStream(index, slot, structured(in), in);
        break;
      case 2:
        applyStream(index, slot, raw(in), in);
        break;
      case 3: {
        const std::vector<uint64_t> keys = requestKeys(in);
        index.holdInFlight(slot, in.below(8), keys.data(), static_cast<uint32_t>(keys.size()));
        break;
      }
      case 4:
        index.releaseInFlight(in.below(8));
        break;
      case 5:
        matchAll(index, in);
        break;
      case 6:
        index.setFed(slot, (in.byte() & 1) != 0);
        break;
      default:
        if ((in.byte() & 1) != 0) {
          index.clear(slot);
        } else {
          index.reset(slot);
        }
    }
    const std::string broken = index.checkInvariants();
    require(broken.empty(), broken.c_str());
  }
  return 0;
}
