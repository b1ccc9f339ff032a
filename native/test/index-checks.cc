// Checks shared by the core-test phases that drive BlockIndex (index-checks.h).
#include "index-checks.h"

#include <sstream>
#include <vector>

#include "harness.h"

namespace core_test {

using kvroute::BlockIndex;

void checkSameBlocks(const BlockIndex& index, const RefIndex& ref, const char* who) {
  CHECK(index.blocks() == ref.size(), who << ": blocks() " << index.blocks() << " != model " << ref.size());
  CHECK(index.stridedBlocks() == ref.stridedBlocks(),
        who << ": stridedBlocks() " << index.stridedBlocks() << " != model " << ref.stridedBlocks());
  for (const std::vector<uint64_t>& path : ref.leafPaths()) {
    const uint32_t n = static_cast<uint32_t>(path.size());
    const uint32_t got = index.match(path.data(), n);
    if (got != n) note("leaf path", path.data(), n);
    CHECK(got == n, who << ": the model holds a path of " << n << " blocks, native match() = " << got);
  }
}

void checkIndexInvariants(const BlockIndex& index, const char* who) {
  const std::string err = index.checkInvariants();
  CHECK(err.empty(), who << ": BlockIndex::checkInvariants(): " << err);
  CHECK(index.segments() <= index.blocks(),
        who << ": " << index.segments() << " segments for " << index.blocks() << " blocks");
}

std::string describe(const char* op, size_t who, uint32_t n, int64_t extra) {
  std::ostringstream os;
  os << op << " inst=" << who << " n=" << n;
  if (extra >= 0) os << " arg=" << extra;
  return os.str();
}

}  // namespace core_test
