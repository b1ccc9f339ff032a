// registry — the policy object for each PolicyKind. Policies are stateless
// (their tunables arrive in DecisionContext::policy), so one static instance
// per kind serves every router on every thread.
#pragma once

#include "core/policies/policy-interface.h"

namespace kvroute {

// The policy of `kind` (a valid PolicyKind).
const Policy& policyFor(PolicyKind kind);

// One per policy file; registry.cc lists them by kind.
const Policy& roundRobinPolicy();
const Policy& sessionHashPolicy();
const Policy& loadOnlyPolicy();
const Policy& lmetricPolicy();
const Policy& stickyPolicy();
const Policy& unifiedPolicy();
const Policy& unifiedKvBothPolicy();
const Policy& minTtftPolicy();

}  // namespace kvroute
