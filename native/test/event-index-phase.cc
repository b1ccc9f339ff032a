// The event-index phase of core-test: random packed KV-event streams (well
// formed, or with a word or a length disturbed) in arrays of exactly their
// lengths, so that a read past an array trips AddressSanitizer; what
// validate() accepts is applied, and every event-fed slot's match must equal
// a plain model of the same rules (EventModel).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/event-index.h"
#include "harness.h"
#include "hash/token-keys.h"
#include "phases.h"
#include "rng.h"

namespace core_test {

namespace {

struct EventModel {
  std::unordered_map<uint64_t, uint64_t> engine;  // engine hash -> key
  std::unordered_map<uint64_t, uint32_t> refs;    // key -> engine hashes
  bool fed = false;
};

}  // namespace

void eventIndexPhase(uint64_t seed, uint32_t ops, Totals& totals) {
  Rng rng(seed * 0xE7E7ULL + 3);
  constexpr uint32_t kSlots = 70;  // past the 56 mask slots
  constexpr uint32_t kBlock = 2;
  kvroute::EventIndex index;
  index.ensureSlots(kSlots);
  std::vector<EventModel> model(kSlots);
  // Conversations the engines store and requests ask for: tokens from a tiny
  // vocabulary, so chains meet.
  std::vector<std::vector<uint32_t>> convs(8);
  std::vector<std::vector<uint64_t>> keys(8);
  for (size_t c = 0; c < convs.size(); ++c) {
    convs[c].resize(kBlock * (4 + rng.below(20)));
    for (uint32_t& t : convs[c]) t = static_cast<uint32_t>(rng.below(5));
    keys[c].resize(convs[c].size() / kBlock);
    kvroute::hashTokenBlocks(convs[c].data(), convs[c].size(), kBlock, false, 0, keys[c].data());
  }
  auto hashOf = [](uint32_t slot, uint64_t key) {
    return (key ^ (slot * 0x9E3779B97F4A7C15ULL)) * 0xFF51AFD7ED558CCDULL;
  };
  std::vector<int32_t> matched(kSlots);
  uint64_t refused = 0;
  uint64_t heldMatches = 0;  // event-fed matches of at least one block
  for (uint32_t op = 0; op < ops; ++op) {
    ++g.step;
    const uint32_t slot = static_cast<uint32_t>(rng.below(kSlots));
    if (rng.percent(5)) {
      model[slot].fed = !model[slot].fed;
      index.setFed(slot, model[slot].fed);
      continue;
    }
    if (rng.percent(2)) {
      index.reset(slot);
      model[slot] = EventModel();
      continue;
    }
    if (rng.percent(30)) {
      const size_t c = rng.below(convs.size());
      const uint32_t limit = static_cast<uint32_t>(rng.below(keys[c].size() + 1));
      std::fill(matched.begin(), matched.end(), -7);
      index.match(keys[c].data(), limit, matched.data());
      for (uint32_t s = 0; s < kSlots; ++s) {
        int32_t expected = -7;
        if (model[s].fed) {
          expected = 0;
          while (static_cast<uint32_t>(expected) < limit && model[s].refs.count(keys[c][expected]) != 0) ++expected;
        }
        CHECK(matched[s] == expected, "slot " << s << " matched " << matched[s] << ", model " << expected);
        if (expected > 0) ++heldMatches;
      }
      continue;
    }
    // A stream of 1-4 records.
    std::vector<uint32_t> opsWords;
    std::vector<uint64_t> hashes;
    std::vector<uint32_t> tokens;
    std::vector<std::function<void()>> effects;
    for (uint64_t r = 1 + rng.below(4); r > 0; --r) {
      const uint64_t kind = rng.below(10);
      const size_t c = rng.below(convs.size());
      if (kind < 6) {
        const size_t start = rng.percent(40) ? 0 : rng.below(keys[c].size());
        const size_t count = std::min<size_t>(1 + rng.below(5), keys[c].size() - start);
        const uint32_t flags = (start > 0 ? kvroute::kFlagParent : 0) | (rng.percent(5) ? kvroute::kFlagLora : 0);
        opsWords.insert(opsWords.end(), {kvroute::kOpStored, flags, static_cast<uint32_t>(count), kBlock});
        if (start > 0) hashes.push_back(hashOf(slot, keys[c][start - 1]));
        for (size_t j = 0; j < count; ++j) hashes.push_back(hashOf(slot, keys[c][start + j]));
        tokens.insert(tokens.end(), convs[c].begin() + start * kBlock, convs[c].begin() + (start + count) * kBlock);
        effects.push_back([&, slot, c, start, count, flags] {
          EventModel& m = model[slot];
          if ((flags & kvroute::kFlagLora) != 0) return;
          if (start > 0 && m.engine.count(hashOf(slot, keys[c][start - 1])) == 0) return;
          for (size_t j = 0; j < count; ++j) {
            const uint64_t h = hashOf(slot, keys[c][start + j]);
            if (m.engine.emplace(h, keys[c][start + j]).second) m.refs[keys[c][start + j]] += 1;
          }
        });
      } else if (kind < 9) {
        const size_t count = rng.below(4);
        opsWords.insert(opsWords.end(), {kvroute::kOpRemoved, 0, static_cast<uint32_t>(count), 0});
        std::vector<uint64_t> picked;
        for (size_t j = 0; j < count; ++j) picked.push_back(hashOf(slot, rng.pick(keys[c])));
        hashes.insert(hashes.end(), picked.begin(), picked.end());
        effects.push_back([&, slot, picked] {
          EventModel& m = model[slot];
          for (uint64_t h : picked) {
            auto it = m.engine.find(h);
            if (it == m.engine.end()) continue;
            if (--m.refs[it->second] == 0) m.refs.erase(it->second);
            m.engine.erase(it);
          }
        });
      } else {
        opsWords.insert(opsWords.end(), {kvroute::kOpCleared, 0, 0, 0});
        effects.push_back([&, slot] {
          model[slot].engine.clear();
          model[slot].refs.clear();
        });
      }
    }
    // Now and then disturb a word or cut an array short.
    const uint64_t disturb = rng.below(8);
    if (disturb == 0)
      opsWords[rng.below(opsWords.size())] =
          static_cast<uint32_t>(rng.pick(std::vector<uint64_t>{0, 4, 7, 0xFFFFFFFF, 1u << 25}));
    if (disturb == 1 && !hashes.empty()) hashes.pop_back();
    if (disturb == 2 && !tokens.empty()) tokens.pop_back();
    if (disturb == 3 && !opsWords.empty()) opsWords.pop_back();
    kvroute::PackedKvEvents p;
    // Exact-size heap copies: nothing past the lengths is addressable.
    std::unique_ptr<uint32_t[]> o(new uint32_t[opsWords.size() + (opsWords.empty() ? 1 : 0)]);
    std::unique_ptr<uint64_t[]> h(new uint64_t[hashes.size() + (hashes.empty() ? 1 : 0)]);
    std::unique_ptr<uint32_t[]> t(new uint32_t[tokens.size() + (tokens.empty() ? 1 : 0)]);
    std::copy(opsWords.begin(), opsWords.end(), o.get());
    std::copy(hashes.begin(), hashes.end(), h.get());
    std::copy(tokens.begin(), tokens.end(), t.get());
    p.ops = o.get();
    p.opsLength = opsWords.size();
    p.hashes = h.get();
    p.hashesLength = hashes.size();
    p.tokens = t.get();
    p.tokensLength = tokens.size();
    note("apply slot " + std::to_string(slot) + " disturb " + std::to_string(disturb), h.get(),
         static_cast<uint32_t>(hashes.size()));
    const std::string error = kvroute::EventIndex::validate(p);
    if (!error.empty()) {
      CHECK(disturb <= 3, "an undisturbed stream was refused: " << error);
      ++refused;
      continue;
    }
    if (disturb == 0) continue;  // a disturbed word that still validates: effects unknown to the model
    index.apply(slot, p);
    for (auto& effect : effects) effect();
    ++totals.commits;
    if (op % 256 == 0) {
      const std::string broken = index.checkInvariants();
      CHECK(broken.empty(), broken);
      ++totals.fullChecks;
    }
  }
  const std::string broken = index.checkInvariants();
  CHECK(broken.empty(), broken);
  CHECK(refused > ops / 50, "too few refused streams: " << refused);
  CHECK(heldMatches > ops / 4, "too few matches of held blocks: " << heldMatches);
  totals.ops += ops;
}

}  // namespace core_test
