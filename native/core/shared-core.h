// shared-core — one routing core shared by the event loops of one process
// (`kvroute serve --threads N`, docs/scale-out.md).
//
// Why it exists: N uWebSockets.js event loops (worker threads) must route
// with one block index, one set of shadow counters and one pin table, so
// that splitting a process across cores splits nothing of the router's
// belief. Each thread keeps its own JsRouter (its own typed-array slabs and
// queued ticket events, which V8 ties to the thread's isolate); they all
// point at one SharedCore.
//
// Invariants:
// - While `locking` is false (the default: one thread), nobody takes the
//   mutex and the hot path pays one relaxed load. share() sets it before the
//   handle can reach another thread (the registry's mutex orders the two), and
//   it is never cleared: once shared, every call of every JsRouter holds the
//   mutex for its whole body, so calls are linearizable in `ops` order.
// - `ops` counts locked calls; the call that held the lock for op k stores k
//   in its own JsRouter (lastOpSeq), so a test can replay an N-thread run
//   single-threaded in exactly the order the core saw it.
// - The registry holds weak references: a handle outlives nothing. The core
//   is freed when the last JsRouter attached to it is finalized.
//
// Hazard: the mutex is not recursive. A JsRouter method takes it once at its
// top (JsRouter::exclusive()) and must not call another locking method.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/router.h"

namespace kvroute {

struct SharedCore {
  explicit SharedCore(const RouterConfig& config, double chunkBytes)
      : router(config), chunkBytes(chunkBytes), blockTokens(config.blockTokens) {}

  Router router;
  // The request-key settings every attached wrapper must use (they were the
  // creating wrapper's config; an attacher's own config is ignored).
  const double chunkBytes;
  const double blockTokens;

  // Takes the mutex when the core is shared (else returns an empty lock) and
  // numbers the call: `lastOpSeq` (the caller's own) gets its `ops` number.
  // Every call of every wrapper takes it once, first; not re-entrant.
  std::unique_lock<std::mutex> exclusive(uint64_t& lastOpSeq);

  std::mutex mutex;
  std::atomic<bool> locking{false};
  uint64_t ops = 0;        // guarded by mutex
  uint64_t contended = 0;  // locked calls that found the mutex taken; guarded by mutex
};

// Publishes `core` for other threads: turns locking on and returns a handle
// (1, 2, ...) that attachSharedCore() accepts. Sharing twice gives the same handle.
uint32_t shareCore(const std::shared_ptr<SharedCore>& core);
// The shared core of `handle`, or null when there is none (never shared, or freed).
std::shared_ptr<SharedCore> attachSharedCore(uint32_t handle);

}  // namespace kvroute
