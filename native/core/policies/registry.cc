#include "core/policies/registry.h"

namespace kvroute {

const Policy& policyFor(PolicyKind kind) {
  switch (kind) {
    case PolicyKind::kRoundRobin:
      return roundRobinPolicy();
    case PolicyKind::kSessionHash:
      return sessionHashPolicy();
    case PolicyKind::kLoadOnly:
      return loadOnlyPolicy();
    case PolicyKind::kLmetric:
      return lmetricPolicy();
    case PolicyKind::kSticky:
      return stickyPolicy();
    case PolicyKind::kUnified:
      return unifiedPolicy();
    case PolicyKind::kUnifiedKvBoth:
      return unifiedKvBothPolicy();
    case PolicyKind::kMinTtft:
      return minTtftPolicy();
  }
  return unifiedPolicy();  // unreachable: kinds are checked where they cross from JS
}

}  // namespace kvroute
