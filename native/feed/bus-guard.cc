#include "feed/bus-guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <mutex>

namespace kvroute::shm {

namespace {

struct Guarded {
  // base is published last (release) and cleared first, so the handler never
  // sees a base with another mapping's size.
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> bytes{0};
  std::atomic<bool> faulted{false};
  std::atomic<bool> writable{false};  // a writer's mapping: its stores must land somewhere too
};

Guarded registry[kMaxGuarded];
struct sigaction previous {};
std::once_flag installed;

void onBus(int signal, siginfo_t* info, void* context) {
  const int savedErrno = errno;
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Guarded& g : registry) {
    const uintptr_t base = g.base.load(std::memory_order_acquire);  // pairs with guardMapping's release
    const size_t bytes = g.bytes.load(std::memory_order_relaxed);
    if (base <= 1 || address < base || address - base >= bytes) continue;  // 1: being registered
    const int protection = g.writable.load(std::memory_order_relaxed) ? PROT_READ | PROT_WRITE : PROT_READ;
    void* zero = mmap(reinterpret_cast<void*>(base), bytes, protection, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (zero != MAP_FAILED) {
      g.faulted.store(true, std::memory_order_relaxed);  // read by the same thread's owner afterwards
      errno = savedErrno;
      return;  // the faulting load re-runs and reads zero
    }
    break;
  }
  errno = savedErrno;
  // Not ours (or the replacement failed): the previous disposition.
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(signal, info, context);
    return;
  }
  if (previous.sa_handler == SIG_IGN) return;
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != nullptr) {
    previous.sa_handler(signal);
    return;
  }
  // The default action: restore it and return, so the load faults again and
  // the process dies with SIGBUS, as it would have without this guard.
  struct sigaction fallback {};
  fallback.sa_handler = SIG_DFL;
  sigemptyset(&fallback.sa_mask);
  sigaction(SIGBUS, &fallback, nullptr);
}

void install() {
  struct sigaction action {};
  action.sa_sigaction = onBus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &previous);
}

}  // namespace

int guardMapping(void* base, size_t bytes, bool writable) {
  std::call_once(installed, install);
  for (int k = 0; k < kMaxGuarded; ++k) {
    Guarded& g = registry[k];
    uintptr_t expected = 0;
    // Claim with a sentinel (1: no mapping starts at address 1), then publish.
    if (!g.base.compare_exchange_strong(expected, 1, std::memory_order_acquire)) continue;
    g.bytes.store(bytes, std::memory_order_relaxed);
    g.faulted.store(false, std::memory_order_relaxed);
    g.writable.store(writable, std::memory_order_relaxed);
    g.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);  // pairs with onBus's acquire
    return k;
  }
  return -1;
}

void unguardMapping(int token) {
  if (token < 0 || token >= kMaxGuarded) return;
  registry[token].base.store(0, std::memory_order_release);
}

bool mappingFaulted(int token) {
  return token >= 0 && token < kMaxGuarded && registry[token].faulted.load(std::memory_order_relaxed);
}

}  // namespace kvroute::shm
