// event-index — what each engine really caches, fed by its vLLM KV cache
// events (docs/kv-events.md, "The event-fed index").
//
// Why it exists: the BlockIndex is the router's belief (inserted at dispatch,
// evicted by a modelled LRU). An engine that publishes KV events says what it
// stores and evicts; this index holds exactly that, keyed by kvroute's token
// block keys (token-keys.h), so a request hashed over its tokens is matched
// against the engine's truth.
//
// Per slot:
//   * engine: the engine's block hash -> the id of a key record, so a
//     BlockRemoved (which names blocks only by engine hash) can find the key
//     and a BlockStored's parent can continue the key chain;
//   * keys: token block key -> key record id; a record holds the key and how
//     many engine hashes map to it (two engine hashes may share a key: vLLM
//     hashes extra keys, e.g. multimodal inputs, that the token key does not,
//     so a key is held while any of its engine hashes is);
//   * counters (EventCounters).
// Fleet-wide, slots below kMaskSlots also enter each held key in one
// key -> holder-bitmask map (a FleetIndex), so the match walk probes each
// request key once for all of them; higher slots are probed one by one.
//
// Events, applied in order per slot (the packed layout is below):
//   * BlockStored: medium other than GPU/null, or a LoRA adapter's blocks
//     (another model's cache): ignored. Parent given and not mapped: orphaned
//     (its keys cannot be computed), skipped. Else each block's key is chained
//     from the parent's key (or from the root), its engine hash is mapped and
//     the key held; an engine hash already mapped is left as it is.
//   * BlockRemoved: other media ignored; each mapped engine hash is unmapped
//     and its key released; an unknown one is counted.
//   * AllBlocksCleared: the slot's index is emptied.
//
// In-flight requests: a token-keyed request routed to an event-fed slot is
// remembered there (its keys, copied) until its ticket completes or aborts
// (holdInFlight / releaseInFlight). The engine publishes a prompt's blocks only
// as it computes them, so without this a session's next turn or a sub-agent
// sent while the first request is still queued or prefilling would match
// nothing on the engine about to hold its prefix, and be predicted uncached
// and scattered. Keys chain (token-keys.h): a request's key at position k
// equals an in-flight request's key at k exactly when their first k + 1
// blocks agree, so the in-flight requests cover a prefix [0, L) of the
// request, L the longest common prefix with any of them, found by bisection.
// Position k is held when the events hold its key or k < L. A running
// request's blocks are not evictable in vLLM, so while it lasts this is no
// overstatement; after it finishes the events alone decide. clear()/reset()
// forget the slot's in-flight requests with the rest.
//
// Match (vLLM's semantics): an event-fed slot holds a prefix of k blocks when
// each of the request's first k positions is held; the walk stops at the first
// miss, once per key for every event-fed slot together (AND of the masks),
// then continues past L one by one for a slot whose in-flight prefix reaches
// beyond its event walk. Cost: O(in-flight requests on the slot x log n) more.
//
// Complexity: a stored block costs one XXH64 over its tokens and about four
// hash-map operations; a removed one about three; the walk O(matched depth)
// probes for the mask slots plus one per high slot per step. No allocation in
// match(); apply() allocates only when a map grows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/fleet-index.h"
#include "util/robin-hood-map.h"

namespace kvroute {

// The packed event stream of one applyKvEvents call (src/events/packed-kv-events.ts
// writes it). Records are kOpWords u32 words in `ops`: [op, flags, count, blockSize].
//   kOpStored:  flags ⊆ {kFlagParent, kFlagOtherMedium, kFlagLora}, count blocks of
//               blockSize in [1, kMaxBlockSize] tokens; consumes (parent ? 1 : 0) + count
//               hashes (the parent first) and count * blockSize tokens.
//   kOpRemoved: flags ⊆ {kFlagOtherMedium}, count hashes, blockSize word 0.
//   kOpCleared: flags, count and blockSize words 0.
// Every record consumes its hashes and tokens even when it is ignored, and the
// records must consume exactly hashesLength hashes and tokensLength tokens.
struct PackedKvEvents {
  const uint32_t* ops = nullptr;
  size_t opsLength = 0;
  const uint64_t* hashes = nullptr;
  size_t hashesLength = 0;
  const uint32_t* tokens = nullptr;
  size_t tokensLength = 0;
};

constexpr uint32_t kOpStored = 1;
constexpr uint32_t kOpRemoved = 2;
constexpr uint32_t kOpCleared = 3;
constexpr size_t kOpWords = 4;
constexpr uint32_t kFlagParent = 1;
constexpr uint32_t kFlagOtherMedium = 2;  // medium neither null nor "GPU"
constexpr uint32_t kFlagLora = 4;         // lora_id not null
constexpr uint32_t kMaxBlockSize = 1u << 24;

// Per slot, cumulative since the slot's instance was added. Blocks, except
// `cleared` (AllBlocksCleared events).
struct EventCounters {
  uint64_t stored = 0;          // blocks of applied BlockStored events (re-stores included)
  uint64_t removed = 0;         // engine hashes unmapped by BlockRemoved
  uint64_t cleared = 0;         // AllBlocksCleared events
  uint64_t ignored = 0;         // blocks of events for another medium or a LoRA adapter
  uint64_t orphaned = 0;        // blocks of BlockStored events whose parent was not mapped
  uint64_t unknownRemoved = 0;  // BlockRemoved hashes that were not mapped
};

class EventIndex {
 public:
  // Slots below this are in the fleet-wide holder mask.
  static constexpr uint32_t kMaskSlots = FleetIndex::kMaxInstances;

  // "" when `p` is a well-formed stream, else what is wrong, naming the word
  // (`packed.ops[i]`). apply() requires a stream this accepted.
  static std::string validate(const PackedKvEvents& p);

  // Grows the per-slot state to `count` slots (never shrinks).
  void ensureSlots(size_t count);
  // The slot's instance left or arrived: contents, counters and fed flag reset.
  void reset(uint32_t slot);
  // Empties the slot's index (counters and fed flag stay).
  void clear(uint32_t slot);
  void setFed(uint32_t slot, bool on);
  bool fed(uint32_t slot) const { return slot < slots_.size() && slots_[slot].fed; }
  bool anyFed() const { return fedMask_ != 0 || !fedHigh_.empty(); }

  void apply(uint32_t slot, const PackedKvEvents& p);

  // The request behind `ticket`, routed to event-fed `slot`, covers ids[0..n)
  // there until releaseInFlight(ticket). A ticket is remembered at most once.
  void holdInFlight(uint32_t slot, double ticket, const uint64_t* ids, uint32_t n);
  // Forgets `ticket`'s request, if it is remembered.
  void releaseInFlight(double ticket);
  // In-flight requests remembered on `slot`.
  size_t inFlight(uint32_t slot) const { return slots_[slot].inFlight.size(); }

  // For every event-fed slot s: matched[s] = the number of leading ids[0..limit)
  // the slot holds. Other entries are left as they were.
  void match(const uint64_t* ids, uint32_t limit, int32_t* matched) const;

  const EventCounters& counters(uint32_t slot) const { return slots_[slot].counters; }
  size_t heldKeys(uint32_t slot) const { return slots_[slot].keys.size(); }
  size_t engineBlocks(uint32_t slot) const { return slots_[slot].engine.size(); }
  size_t bytes() const;
  // "" when the maps, records and fleet mask agree; else the first violation. For tests.
  std::string checkInvariants() const;

 private:
  struct KeyRecord {
    uint64_t key = 0;
    uint64_t refs = 0;  // engine hashes mapped to this key; 0: the record is free
  };
  struct InFlightRequest {
    uint64_t ticket = 0;
    std::vector<uint64_t> ids;
  };
  struct SlotEvents {
    RobinHoodMap engine;  // engine hash -> record id
    RobinHoodMap keys;    // token block key -> record id
    std::vector<KeyRecord> records;
    std::vector<uint32_t> freeRecords;
    std::vector<InFlightRequest> inFlight;  // unordered
    EventCounters counters;
    bool fed = false;
  };

  void stored(uint32_t slot, uint32_t flags, uint32_t count, uint32_t blockSize, const uint64_t* hashes,
              const uint32_t* tokens);
  void removed(uint32_t slot, uint32_t flags, uint32_t count, const uint64_t* hashes);
  // One more engine hash maps to `key`; returns the key's record id.
  uint32_t hold(uint32_t slot, uint64_t key);
  // One engine hash mapped to record `id` is gone.
  void release(uint32_t slot, uint32_t id);
  void refreshFed();
  // The longest prefix of ids[0..limit) an in-flight request on `slot` shares.
  uint32_t inFlightPrefix(uint32_t slot, const uint64_t* ids, uint32_t limit) const;

  std::vector<SlotEvents> slots_;
  FleetIndex fleet_;  // held keys of slots below kMaskSlots
  uint64_t fedMask_ = 0;
  std::vector<uint32_t> fedHigh_;                        // event-fed slots >= kMaskSlots, ascending
  std::vector<uint64_t> keyScratch_;                     // stored(): the event's keys
  std::unordered_map<uint64_t, uint32_t> inFlightSlot_;  // ticket -> slot of its remembered request
  std::vector<uint32_t> inFlightSlots_;                  // slots remembering a request, ascending
  // match()'s scratch: the high slots still matching (sized with fedHigh_).
  mutable std::vector<uint32_t> alive_;
};

}  // namespace kvroute
