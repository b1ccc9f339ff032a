// route-call — one route() or match() on a router that other threads may
// share (shared-core.h), in the order the binding runs it. Plain C++, so the
// ThreadSanitizer stress test (native/test/shared-core-stress.cc) drives the
// very sequence js-router-route.cc does, not a copy of it.
//
// The order, and why:
//   1. Thread-private, before the lock: the request's own fields (the slab's
//      numbers, the ids or the prompt's block hashes, the session key). They
//      touch only the caller's slab and scratch, and a long prompt's hashing
//      would otherwise hold every other thread's route.
//   2. The lock (SharedCore::exclusive).
//   3. Under the lock: every check that reads router state. Today that is the
//      model group against Router::groupCount(), which setInstanceGroups()
//      on another thread may grow (resizing the vector it reads) at any time.
//   4. The router call itself.
// Invariant: `readRequest` reads nothing of the Router; a check that needs
// the router belongs in bindRequestToRouter().
#pragma once

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "core/route-io.h"
#include "core/router.h"
#include "core/shared-core.h"

namespace kvroute {

// A bad request field found by a plain C++ check; the binding turns it into
// a RangeError with code ERR_KVROUTE_INVALID_ARG_VALUE.
class RequestRangeError : public std::range_error {
 public:
  using std::range_error::range_error;
};

// Step 3, under the lock: the request's model group (the slab's number, -1
// for any model) checked against the router's groups, into `in.group`.
void bindRequestToRouter(const Router& router, double group, RouteInput& in);

// Runs one call in the order above: `readRequest(in)` fills everything of the
// request but its group (thread-private); then, holding `core`'s lock, the
// group is bound and `locked(router, in)` makes the call, whose result is
// returned. `lastOpSeq` receives the call's number (SharedCore::exclusive).
template <typename ReadRequest, typename Locked>
auto runRouteCall(SharedCore& core, uint64_t& lastOpSeq, double group, ReadRequest&& readRequest, Locked&& locked) {
  RouteInput in;
  std::forward<ReadRequest>(readRequest)(in);
  const auto lock = core.exclusive(lastOpSeq);
  // Under the lock: groupCount() changes when another thread's
  // setInstanceGroups() grows the router's groups (resizing the vector it
  // reads). Checked before the lock, it was a data race, and a group declared
  // between the check and the lock was refused though the call came after it.
  bindRequestToRouter(core.router, group, in);
  return std::forward<Locked>(locked)(core.router, in);
}

}  // namespace kvroute
