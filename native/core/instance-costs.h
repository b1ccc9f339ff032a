// instance-costs — what one instance's work costs, as min_ttft prices it
// (docs/policies.md "Learned costs" and "Sessions between turns").
//
// Why it exists: a fleet mixes GPU generations, TP sizes and engine versions,
// so one preset's coefficients misprice every instance unlike it. The embedder
// (a CostLearner, off the hot path) pushes each instance's learned coefficients
// here; min_ttft's score on the instance is then its predicted TTFT in seconds:
//   overheadSeconds + secondsPerToken x work x (1 + interference x requests)
// An instance with no costs pushed is priced in token-equivalents, exactly as
// before costs existed: secondsPerToken 1, overhead 0, interference = the
// policy's batchWeight. Mixing the two units in one fleet is the embedder's
// hazard to avoid (the public Router pushes a default to every instance once
// any instance has costs).
//
// returningTokens is separate from the costs: the expected prefill of sessions
// idle on the instance between turns, which will come back to it soon. It is
// added to the instance's queued prefill in min_ttft's work, in either unit.
// interference NaN means the policy's batchWeight (following setPolicy), which
// is what a CostLearner pushes: it learns the interference but steers with the
// policy's tail guard.
// Invariants (checked by the bindings and the reference before anything is
// stored): every field finite (interference may be NaN), secondsPerToken > 0,
// the rest >= 0.
#pragma once

namespace kvroute {

struct InstanceCosts {
  double secondsPerToken = 1;
  double overheadSeconds = 0;
  double interference = 0;
};

// The costs in force on one instance at one decision (the route's resolved copy).
struct CostTerms {
  double secondsPerToken;
  double overheadSeconds;
  double interference;
  double returningTokens;
};

}  // namespace kvroute
