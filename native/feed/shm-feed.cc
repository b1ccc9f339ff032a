#include "feed/shm-feed.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <random>
#include <stdexcept>

#include "feed/bus-guard.h"

namespace kvroute::shm {

namespace {

int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

template <typename T>
T loadRelaxed(const uint8_t* base, size_t offset) {
  return __atomic_load_n(reinterpret_cast<const T*>(base + offset), __ATOMIC_RELAXED);
}

template <typename T>
void storeRelaxed(uint8_t* base, size_t offset, T value) {
  __atomic_store_n(reinterpret_cast<T*>(base + offset), value, __ATOMIC_RELAXED);
}

uint32_t le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);  // the layout is little-endian, as is every host kvroute builds on
  return v;
}

uint64_t le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

size_t fileBytes(uint32_t slots) { return kHeaderBytes + static_cast<size_t>(slots) * kSlotBytes; }

// The header's verdict on a file of `size` bytes.
FeedStatus checkHeader(const uint8_t* header, size_t size, uint32_t& slots, uint64_t& generation) {
  if (std::memcmp(header, kMagic, sizeof kMagic) != 0) return FeedStatus::kBadMagic;
  if (le32(header + 8) != kVersion) return FeedStatus::kBadVersion;
  slots = le32(header + 12);
  if (le32(header + 16) != kSlotBytes || slots == 0 || slots > kMaxSlots || size != fileBytes(slots))
    return FeedStatus::kBadSize;
  generation = le64(header + 24);
  return FeedStatus::kOk;
}

std::runtime_error systemError(const std::string& what, const std::string& path) {
  return std::runtime_error(what + " " + path + ": " + std::strerror(errno));
}

}  // namespace

const char* statusName(FeedStatus status) {
  switch (status) {
    case FeedStatus::kOk:
      return "ok";
    case FeedStatus::kMissing:
      return "missing";
    case FeedStatus::kBadMagic:
      return "bad-magic";
    case FeedStatus::kBadVersion:
      return "bad-version";
    case FeedStatus::kBadSize:
      return "bad-size";
  }
  return "unknown";
}

int64_t realtimeCoarseNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t monotonicCoarseNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t realtimeNs() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// ---------------------------------------------------------------- reader

FeedReader::FeedReader(std::string path, double recheckMs) : path_(std::move(path)), recheckMs_(recheckMs) {
  refresh(true);
}

FeedReader::~FeedReader() { unmap(); }

void FeedReader::unmap() {
  unguardMapping(guard_);  // before munmap: the range may be reused at once
  guard_ = -1;
  if (base_ != nullptr) munmap(base_, mappedBytes_);
  base_ = nullptr;
  mappedBytes_ = 0;
  slotCount_ = 0;
}

int64_t FeedReader::monotonicNow() { return monotonicNs(); }

FeedStatus FeedReader::refreshAt(int64_t now, bool force) {
  // A mapping whose file shrank under it (bus-guard.h) is re-checked at once.
  const bool faulted = mappingFaulted(guard_);
  if (!force && !faulted && static_cast<double>(now - lastCheckNs_) < recheckMs_ * 1e6) return status_;
  lastCheckNs_ = now;
  struct stat st {};
  if (stat(path_.c_str(), &st) != 0) {
    unmap();
    return status_ = FeedStatus::kMissing;
  }
  const bool sameFile = base_ != nullptr && static_cast<uint64_t>(st.st_ino) == inode_ &&
                        static_cast<uint64_t>(st.st_dev) == device_ && static_cast<size_t>(st.st_size) == mappedBytes_;
  // The mapping covers the whole file (checked just now), so reading the header is safe.
  if (sameFile && !faulted && loadRelaxed<uint64_t>(base_, 24) == generation_ && status_ == FeedStatus::kOk)
    return status_;
  unmap();
  return status_ = mapFile();
}

FeedStatus FeedReader::mapFile() {
  const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FeedStatus::kMissing;
  struct stat st {};
  uint8_t header[kHeaderBytes];
  FeedStatus verdict = FeedStatus::kBadSize;
  uint32_t slots = 0;
  uint64_t generation = 0;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kHeaderBytes &&
      pread(fd, header, kHeaderBytes, 0) == static_cast<ssize_t>(kHeaderBytes)) {
    verdict = checkHeader(header, static_cast<size_t>(st.st_size), slots, generation);
  } else if (static_cast<size_t>(st.st_size) >= sizeof kMagic) {
    verdict = FeedStatus::kBadMagic;
  }
  if (verdict == FeedStatus::kOk) {
    void* base = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      verdict = FeedStatus::kMissing;
    } else {
      base_ = static_cast<uint8_t*>(base);
      mappedBytes_ = static_cast<size_t>(st.st_size);
      inode_ = static_cast<uint64_t>(st.st_ino);
      device_ = static_cast<uint64_t>(st.st_dev);
      slotCount_ = slots;
      generation_ = generation;
      guard_ = guardMapping(base_, mappedBytes_);
      ++mapEpoch_;
    }
  }
  close(fd);
  return verdict;
}

bool FeedReader::read(uint32_t slotIndex, SlotValues& out, bool withInstance, uint64_t* seqOut) const {
  if (base_ == nullptr || slotIndex >= slotCount_) return false;
  const uint8_t* p = base_ + kHeaderBytes + static_cast<size_t>(slotIndex) * kSlotBytes;
  const auto* seq = reinterpret_cast<const uint64_t*>(p + slot::kSeq);
  for (int attempt = 0; attempt < kReadAttempts; ++attempt) {
    const uint64_t before = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
    if (before & 1) continue;  // a writer is inside
    out.timestampNs = loadRelaxed<int64_t>(p, slot::kTimestampNs);
    out.running = loadRelaxed<uint32_t>(p, slot::kRunning);
    out.waiting = loadRelaxed<uint32_t>(p, slot::kWaiting);
    out.kvBlocksUsed = loadRelaxed<uint64_t>(p, slot::kKvUsed);
    out.kvBlocksTotal = loadRelaxed<uint64_t>(p, slot::kKvTotal);
    out.pendingPrefillTokens = loadRelaxed<uint64_t>(p, slot::kPendingPrefill);
    out.maxPrefillRemaining = loadRelaxed<uint64_t>(p, slot::kMaxPrefillRemaining);
    out.decodeBatch = loadRelaxed<uint32_t>(p, slot::kDecodeBatch);
    out.flags = loadRelaxed<uint32_t>(p, slot::kFlags);
    out.prefixCacheQueries = loadRelaxed<uint64_t>(p, slot::kPrefixQueries);
    out.prefixCacheHits = loadRelaxed<uint64_t>(p, slot::kPrefixHits);
    for (size_t word = 0; withInstance && word < kInstanceIdBytes / 8; ++word) {
      const uint64_t bytes = loadRelaxed<uint64_t>(p, slot::kInstance + word * 8);
      std::memcpy(out.instance + word * 8, &bytes, 8);
    }
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(seq, __ATOMIC_RELAXED) == before) {
      if (seqOut != nullptr) *seqOut = before;
      return out.timestampNs != 0;
    }
  }
  return false;
}

// ---------------------------------------------------------------- writer

FeedWriter::FeedWriter(const std::string& path, uint32_t slots, bool recreate) {
  if (slots == 0 || slots > kMaxSlots)
    throw std::range_error("slots must be in [1, " + std::to_string(kMaxSlots) + "], got " + std::to_string(slots));
  const size_t bytes = fileBytes(slots);
  if (!recreate) {
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st {};
      uint8_t header[kHeaderBytes];
      uint32_t existing = 0;
      uint64_t generation = 0;
      const bool joinable = fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes &&
                            pread(fd, header, kHeaderBytes, 0) == static_cast<ssize_t>(kHeaderBytes) &&
                            checkHeader(header, bytes, existing, generation) == FeedStatus::kOk && existing == slots;
      if (joinable) {
        void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (base == MAP_FAILED) throw systemError("cannot map", path);
        base_ = static_cast<uint8_t*>(base);
        bytes_ = bytes;
        slotCount_ = slots;
        generation_ = generation;
        guard_ = guardMapping(base_, bytes_, true);  // another process may truncate the joined file
        return;
      }
      close(fd);
    }
  }
  // A fresh file, complete before it takes the name.
  std::random_device entropy;
  uint64_t generation = (static_cast<uint64_t>(entropy()) << 32) ^ entropy() ^ static_cast<uint64_t>(realtimeNs());
  if (generation == 0) generation = 1;
  const std::string temp = path + ".tmp-" + std::to_string(getpid()) + "-" + std::to_string(generation & 0xffff);
  const int fd = open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) throw systemError("cannot create", temp);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::runtime_error error = systemError("cannot size", temp);
    close(fd);
    unlink(temp.c_str());
    throw error;
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    const std::runtime_error error = systemError("cannot map", temp);
    unlink(temp.c_str());
    throw error;
  }
  base_ = static_cast<uint8_t*>(base);
  bytes_ = bytes;
  slotCount_ = slots;
  generation_ = generation;
  std::memcpy(base_, kMagic, sizeof kMagic);
  std::memcpy(base_ + 8, &kVersion, 4);
  std::memcpy(base_ + 12, &slots, 4);
  std::memcpy(base_ + 16, &kSlotBytes, 4);
  std::memcpy(base_ + 24, &generation, 8);
  if (rename(temp.c_str(), path.c_str()) != 0) {
    const std::runtime_error error = systemError("cannot rename into", path);
    munmap(base_, bytes_);
    base_ = nullptr;
    unlink(temp.c_str());
    throw error;
  }
  guard_ = guardMapping(base_, bytes_, true);  // once named, anyone may truncate it
}

FeedWriter::~FeedWriter() {
  unguardMapping(guard_);  // before munmap: the range may be reused at once
  if (base_ != nullptr) munmap(base_, bytes_);
}

void FeedWriter::publish(uint32_t slotIndex, const SlotValues& v) {
  if (slotIndex >= slotCount_)
    throw std::range_error("slot must be below " + std::to_string(slotCount_) + ", got " + std::to_string(slotIndex));
  uint8_t* p = base_ + kHeaderBytes + static_cast<size_t>(slotIndex) * kSlotBytes;
  auto* seq = reinterpret_cast<uint64_t*>(p + slot::kSeq);
  // Even, and not below what is there (a writer that died inside left it odd).
  const uint64_t start = (__atomic_load_n(seq, __ATOMIC_RELAXED) + 1) & ~uint64_t{1};
  __atomic_store_n(seq, start + 1, __ATOMIC_RELAXED);
  __atomic_thread_fence(__ATOMIC_RELEASE);
  storeRelaxed<int64_t>(p, slot::kTimestampNs, v.timestampNs);
  storeRelaxed<uint32_t>(p, slot::kRunning, v.running);
  storeRelaxed<uint32_t>(p, slot::kWaiting, v.waiting);
  storeRelaxed<uint64_t>(p, slot::kKvUsed, v.kvBlocksUsed);
  storeRelaxed<uint64_t>(p, slot::kKvTotal, v.kvBlocksTotal);
  storeRelaxed<uint64_t>(p, slot::kPendingPrefill, v.pendingPrefillTokens);
  storeRelaxed<uint64_t>(p, slot::kMaxPrefillRemaining, v.maxPrefillRemaining);
  storeRelaxed<uint32_t>(p, slot::kDecodeBatch, v.decodeBatch);
  storeRelaxed<uint32_t>(p, slot::kFlags, v.flags);
  storeRelaxed<uint64_t>(p, slot::kPrefixQueries, v.prefixCacheQueries);
  storeRelaxed<uint64_t>(p, slot::kPrefixHits, v.prefixCacheHits);
  for (size_t word = 0; word < kInstanceIdBytes / 8; ++word) {
    uint64_t bytes;
    std::memcpy(&bytes, v.instance + word * 8, 8);
    storeRelaxed<uint64_t>(p, slot::kInstance + word * 8, bytes);
  }
  __atomic_store_n(seq, start + 2, __ATOMIC_RELEASE);
}

}  // namespace kvroute::shm
