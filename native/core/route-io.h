// route-io — one route()'s input and output, shared by the router and the
// policies (policies/policy-interface.h) so neither header includes the other.
#pragma once

#include <cstdint>

#include "core/policy.h"

namespace kvroute {

struct RouteInput {
  const uint64_t* ids = nullptr;
  uint32_t n = 0;
  double inputTokens = 0;   // prompt tokens
  double blockTokens = 16;  // tokens per block of `ids`
  // The request's model group (< groupCount()), or -1: any routable instance.
  int32_t group = -1;
  bool hasSession = false;
  uint64_t sessionKey = 0;
  bool dryRun = false;  // decide and explain, change nothing
  // The ids are token block keys (token-keys.h): event-fed slots answer their
  // match from the event index.
  bool tokenKeys = false;
};

struct RouteOutput {
  int32_t slot = -1;  // -1: no routable instance
  Reason reason = Reason::kRoundRobin;
  double ticket = -1;  // -1 for dry runs and when no instance was chosen
  // The offload layer's part of the decision is Router::lastOffload().
};

}  // namespace kvroute
