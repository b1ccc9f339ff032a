// shm-feed — the engine-state feed in shared memory (docs/shm-layout.md).
//
// Why it exists: the router must see each engine's real state on its hot path
// without locks or system calls. Engines (or a publisher) write fixed-size
// slots guarded by a seqlock; the router maps the file once and copies a slot
// in a few dozen nanoseconds.
//
// Hazards:
// - Reading a mapped page past the end of its file raises SIGBUS. The reader
//   checks the file (path identity and size) before every map, and again at
//   most every `recheckMs` (a stat, never per read). A file truncated in place
//   between two checks is survived: bus-guard.h replaces the mapping with zero
//   pages at the first fault (slots read as never published) and the next
//   refresh, at once, re-checks the file. Writers should still re-create a
//   file by renaming a new one over it, which leaves the old mapping valid
//   until the reader re-maps.
// - One writer per slot. Two writers on one slot break the seqlock.
// - The ordering uses the GCC/Clang __atomic builtins (C++17 has no
//   atomic_ref); every field access in the slot is an atomic access, so
//   concurrent readers and writers never race in the C++ sense.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvroute::shm {

constexpr char kMagic[8] = {'K', 'V', 'R', 'S', 'T', 'A', 'T', 'E'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 64;
constexpr uint32_t kSlotBytes = 128;
constexpr size_t kInstanceIdBytes = 48;
constexpr int kReadAttempts = 8;
constexpr uint32_t kMaxSlots = 1u << 16;

// Field offsets inside a slot (docs/shm-layout.md).
namespace slot {
constexpr size_t kSeq = 0, kTimestampNs = 8, kRunning = 16, kWaiting = 20, kKvUsed = 24, kKvTotal = 32,
                 kPendingPrefill = 40, kMaxPrefillRemaining = 48, kDecodeBatch = 56, kFlags = 60, kPrefixQueries = 64,
                 kPrefixHits = 72, kInstance = 80;
}

constexpr uint32_t kFlagUnreachable = 1;

// One slot's values, as written and as read.
struct SlotValues {
  int64_t timestampNs = 0;
  uint32_t running = 0;
  uint32_t waiting = 0;
  uint64_t kvBlocksUsed = 0;
  uint64_t kvBlocksTotal = 0;
  uint64_t pendingPrefillTokens = 0;
  uint64_t maxPrefillRemaining = 0;
  uint32_t decodeBatch = 0;
  uint32_t flags = 0;
  uint64_t prefixCacheQueries = 0;
  uint64_t prefixCacheHits = 0;
  char instance[kInstanceIdBytes] = {};
};

// Why a reader is not reading. Each is reported once per transition.
enum class FeedStatus : int {
  kOk = 0,
  kMissing = 1,     // the file does not exist or cannot be opened
  kBadMagic = 2,    // not a kvroute state file
  kBadVersion = 3,  // another layout version
  kBadSize = 4,     // slot size, slot count and file size disagree
};

const char* statusName(FeedStatus status);

// Nanoseconds since the Unix epoch (CLOCK_REALTIME; vDSO, no system call).
// The feed's timestamps are on this clock: writers in other processes stamp
// their snapshots with it, so only the wall clock can tell their age.
int64_t realtimeNs();
// The same at the kernel tick's resolution (CLOCK_REALTIME_COARSE, a few ms):
// several times cheaper, and plenty for a staleness of seconds.
int64_t realtimeCoarseNs();
// CLOCK_MONOTONIC_COARSE: for scheduling the reader's re-checks (refreshAt),
// which a wall clock stepped backwards would stop.
int64_t monotonicCoarseNs();

// How far in the future (on the reader's wall clock) a snapshot's timestamp
// may be and still count as fresh: the coarse clock's tick (a few ms) and
// scheduling between a writer's clock reading and the reader's, with a wide
// margin. Writer and reader share the host's clock; a timestamp further ahead
// is corrupt or hostile and the snapshot is treated as stale. The TypeScript
// reference router uses the same figure (FEED_MAX_FUTURE_MS).
constexpr int64_t kMaxFutureNs = 100 * 1000000LL;

// Whether a snapshot stamped `timestampNs` is fresh at `nowNs`: at most
// `staleNs` old and at most kMaxFutureNs ahead. Exact for every int64 input
// (the difference is taken in unsigned arithmetic on the ordered pair, so a
// hostile timestamp cannot overflow it).
inline bool snapshotFresh(int64_t timestampNs, int64_t nowNs, int64_t staleNs) {
  if (timestampNs >= nowNs) return static_cast<uint64_t>(timestampNs) - static_cast<uint64_t>(nowNs) <= kMaxFutureNs;
  return static_cast<uint64_t>(nowNs) - static_cast<uint64_t>(timestampNs) <= static_cast<uint64_t>(staleNs);
}

class FeedReader {
 public:
  explicit FeedReader(std::string path, double recheckMs = 100);
  ~FeedReader();
  FeedReader(const FeedReader&) = delete;
  FeedReader& operator=(const FeedReader&) = delete;

  // Re-checks the file if `recheckMs` passed since the last check (or `force`),
  // re-mapping when it was replaced, resized or re-generated. Cheap otherwise.
  FeedStatus refresh(bool force = false) { return refreshAt(monotonicNow(), force); }
  // refresh() at a caller's reading of CLOCK_MONOTONIC (or its coarse twin,
  // monotonicCoarseNs()): the re-check interval is measured on it, so it must
  // never step backwards.
  FeedStatus refreshAt(int64_t monotonicNs, bool force = false);
  FeedStatus status() const { return status_; }
  uint32_t slotCount() const { return status_ == FeedStatus::kOk ? slotCount_ : 0; }
  uint64_t generation() const { return generation_; }

  // One consistent snapshot of `slot`, or false: not mapped, out of range,
  // never published, or a writer kept it busy for every attempt.
  // `withInstance` false skips the 48-byte instance id (the router never needs it).
  // `seqOut`, when given, receives the (even) sequence the snapshot was taken at.
  bool read(uint32_t slot, SlotValues& out, bool withInstance = true, uint64_t* seqOut = nullptr) const;

  // The slot's sequence now (acquire); odd (busy) when unmapped or out of range.
  // A writer moves it on every publish, so an unchanged even sequence within
  // one mapping (mapEpoch) means unchanged contents.
  uint64_t sequence(uint32_t slot) const {
    if (base_ == nullptr || slot >= slotCount_) return 1;
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(base_ + kHeaderBytes + size_t{slot} * kSlotBytes),
                           __ATOMIC_ACQUIRE);
  }
  // Counts successful maps, so a reader's cached snapshots die with their mapping.
  uint64_t mapEpoch() const { return mapEpoch_; }

 private:
  static int64_t monotonicNow();
  void unmap();
  FeedStatus mapFile();

  std::string path_;
  double recheckMs_;
  int64_t lastCheckNs_ = 0;
  FeedStatus status_ = FeedStatus::kMissing;
  uint8_t* base_ = nullptr;
  size_t mappedBytes_ = 0;
  uint64_t inode_ = 0, device_ = 0;
  uint32_t slotCount_ = 0;
  uint64_t generation_ = 0;
  uint64_t mapEpoch_ = 0;
  int guard_ = -1;  // bus-guard.h's token for the mapping
};

class FeedWriter {
 public:
  // Opens `path` for publishing into `slots` slots. An existing file with the
  // same layout and slot count is joined (its slots keep their values); any
  // other file, or `recreate`, is replaced by a fresh one (new generation),
  // renamed into place so readers never map a half-written header.
  FeedWriter(const std::string& path, uint32_t slots, bool recreate);
  ~FeedWriter();
  FeedWriter(const FeedWriter&) = delete;
  FeedWriter& operator=(const FeedWriter&) = delete;

  uint32_t slotCount() const { return slotCount_; }
  uint64_t generation() const { return generation_; }
  void publish(uint32_t slot, const SlotValues& values);

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
  uint32_t slotCount_ = 0;
  uint64_t generation_ = 0;
  int guard_ = -1;  // bus-guard.h's token for the mapping
};

}  // namespace kvroute::shm
