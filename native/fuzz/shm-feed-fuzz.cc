// shm-feed-fuzz — libFuzzer target for the shared-memory feed reader
// (feed/shm-feed.h) on arbitrary file images.
//
// Input: byte 0 chooses (bit 0: give the first image a well-formed header,
// magic, version, slot size and the slot count its length holds, so most runs
// reach the slots; bit 1: a second image follows and replaces the first;
// bit 2: it replaces it in place when the sizes match, as a joining writer
// does, else by rename as FeedWriter does). Bytes 1-2: the first image's
// length (little-endian, capped by what is left); the rest is the second.
// Each image is written to a file of this process, a FeedReader opens it,
// refreshes (forced, then at clock readings from the input), and every slot
// is read with and without the instance id, plus one slot past the end.
// A truncation in place is not a case: the reader's documented hazard
// (SIGBUS) belongs to the writer's contract.
// Checked: the status is one of the five; slotCount() is 0 unless ok; a read
// that succeeds saw an even sequence and a non-zero timestamp; past the end
// read() fails and sequence() is odd. Any sanitizer report is a finding.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "feed/shm-feed.h"
#include "fuzz/fuzz-input.h"

namespace {

namespace shm = kvroute::shm;
using kvroute::fuzz::FuzzInput;
using kvroute::fuzz::require;

std::string filePath(const char* suffix) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/kvroute-shm-fuzz-" + std::to_string(getpid()) +
         suffix;
}

void writeFile(const std::string& path, const std::vector<uint8_t>& bytes, int flags) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0600);
  require(fd >= 0, "cannot create the image file");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    require(n > 0, "cannot write the image file");
    done += static_cast<size_t>(n);
  }
  close(fd);
}

// A header the reader accepts for an image of this length (whole slots only count).
void wellFormed(std::vector<uint8_t>& image) {
  if (image.size() < shm::kHeaderBytes) image.resize(shm::kHeaderBytes);
  const uint32_t slots = static_cast<uint32_t>((image.size() - shm::kHeaderBytes) / shm::kSlotBytes);
  std::memcpy(image.data(), shm::kMagic, sizeof shm::kMagic);
  std::memcpy(image.data() + 8, &shm::kVersion, 4);
  std::memcpy(image.data() + 12, &slots, 4);
  std::memcpy(image.data() + 16, &shm::kSlotBytes, 4);
}

void readEverySlot(const shm::FeedReader& reader) {
  const shm::FeedStatus status = reader.status();
  require(status >= shm::FeedStatus::kOk && status <= shm::FeedStatus::kBadSize, "an unknown status");
  require(std::strcmp(shm::statusName(status), "unknown") != 0, "a status without a name");
  if (status != shm::FeedStatus::kOk) require(reader.slotCount() == 0, "slots while not ok");
  const uint32_t count = reader.slotCount();
  shm::SlotValues values;
  for (uint32_t slot = 0; slot < count; ++slot) {
    uint64_t seq = 1;
    if (reader.read(slot, values, true, &seq)) {
      require((seq & 1) == 0 && values.timestampNs != 0, "a read of a busy or unpublished slot succeeded");
    }
    reader.read(slot, values, false);
    (void)reader.sequence(slot);
  }
  require(!reader.read(count, values), "a read past the last slot succeeded");
  require((reader.sequence(count) & 1) == 1, "the sequence past the last slot is even");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzInput in(data, size);
  const uint8_t choice = in.byte();
  const size_t firstLength = in.integer<uint16_t>();
  size_t n = 0;
  const uint8_t* p = in.bytes(firstLength, &n);
  std::vector<uint8_t> first(p, p + n);
  p = in.bytes(in.left(), &n);
  std::vector<uint8_t> second(p, p + n);
  if ((choice & 1) != 0) wellFormed(first);

  static const std::string path = filePath("");
  static const std::string temp = filePath(".next");
  writeFile(path, first, O_TRUNC);
  {
    shm::FeedReader reader(path, 1);
    readEverySlot(reader);
    if ((choice & 2) != 0) {
      if ((choice & 4) != 0 && second.size() == first.size()) {
        writeFile(path, second, 0);  // in place, same size: what a joining writer may do
      } else {
        writeFile(temp, second, O_TRUNC);
        require(rename(temp.c_str(), path.c_str()) == 0, "cannot rename the second image");
      }
      // Not yet due, then due, then forced: each path of refreshAt.
      reader.refreshAt(0);
      readEverySlot(reader);
      reader.refreshAt(int64_t{1} << 62);
      readEverySlot(reader);
      reader.refresh(true);
      readEverySlot(reader);
    }
  }
  unlink(path.c_str());
  return 0;
}
