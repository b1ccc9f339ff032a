#include "id-table.h"

namespace kvroute {

IdTable::IdTable() { resize(kInitialSlots); }

void IdTable::resize(size_t slotCount) {
  std::vector<IdSlot> old;
  old.swap(slots_);
  slots_.assign(slotCount, IdSlot{0, kEmptySeg, 0});
  slots_.shrink_to_fit();
  mask_ = slotCount - 1;
  growAt_ = static_cast<size_t>(static_cast<double>(slotCount) * kMaxLoad);
  for (const IdSlot& s : old) {
    if (s.seg == kEmptySeg) continue;
    size_t i = bucketOf(s.id);
    while (slots_[i].seg != kEmptySeg) i = (i + 1) & mask_;
    slots_[i] = s;
  }
}

bool IdTable::insert(uint64_t id, uint32_t seg, uint32_t depth) {
  if (size_ + 1 > growAt_) resize(slots_.size() * 2);
  size_t i = bucketOf(id);
  for (;;) {
    IdSlot& s = slots_[i];
    if (s.seg == kEmptySeg) {
      s = IdSlot{id, seg, depth};
      ++size_;
      return true;
    }
    if (s.id == id) return false;
    i = (i + 1) & mask_;
  }
}

bool IdTable::erase(uint64_t id) {
  size_t i = bucketOf(id);
  for (;;) {
    if (slots_[i].seg == kEmptySeg) return false;
    if (slots_[i].id == id) break;
    i = (i + 1) & mask_;
  }
  // Backward-shift deletion: pull later members of the probe run into the
  // hole whenever their home bucket does not lie cyclically in (hole, j].
  size_t hole = i;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask_;
    if (slots_[j].seg == kEmptySeg) break;
    const size_t home = bucketOf(slots_[j].id);
    const bool homeInRange = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (homeInRange) continue;
    slots_[hole] = slots_[j];
    hole = j;
  }
  slots_[hole].seg = kEmptySeg;
  --size_;
  return true;
}

void IdTable::clear() {
  std::vector<IdSlot>().swap(slots_);
  size_ = 0;
  resize(kInitialSlots);
}

}  // namespace kvroute
