#include "core/shared-core.h"

#include <unordered_map>

namespace kvroute {
namespace {

// The process's shared cores by handle. One addon binary is loaded once per
// process and initialised once per thread (Node-API environment), so these
// statics are the process's own, seen by every thread.
std::mutex registryMutex;
std::unordered_map<uint32_t, std::weak_ptr<SharedCore>> registry;
uint32_t lastHandle = 0;

}  // namespace

std::unique_lock<std::mutex> SharedCore::exclusive(uint64_t& lastOpSeq) {
  if (!locking.load(std::memory_order_acquire)) return {};
  std::unique_lock<std::mutex> lock(mutex, std::try_to_lock);
  if (!lock.owns_lock()) {
    lock.lock();
    ++contended;
  }
  lastOpSeq = ++ops;
  return lock;
}

uint32_t shareCore(const std::shared_ptr<SharedCore>& core) {
  std::lock_guard<std::mutex> guard(registryMutex);
  for (auto it = registry.begin(); it != registry.end();) {
    const std::shared_ptr<SharedCore> live = it->second.lock();
    if (live == core) return it->first;
    it = live == nullptr ? registry.erase(it) : std::next(it);
  }
  core->locking.store(true, std::memory_order_release);
  registry.emplace(++lastHandle, core);
  return lastHandle;
}

std::shared_ptr<SharedCore> attachSharedCore(uint32_t handle) {
  std::lock_guard<std::mutex> guard(registryMutex);
  const auto it = registry.find(handle);
  return it == registry.end() ? nullptr : it->second.lock();
}

}  // namespace kvroute
