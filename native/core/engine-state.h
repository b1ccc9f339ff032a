// engine-state — what the router believes about one engine's load.
//
// Why it exists: every policy except round_robin and session_hash weighs load.
// The router keeps its own shadow counters, moved synchronously at dispatch,
// first token, completion and abort (so back-to-back dispatches see each other:
// the ES ablation's "race fix", docs/glossary.md). An outside source (a metrics scrape or the shared
// memory feed) may also report the engine's real state; while that snapshot is
// fresh (age <= stalenessMs) each field the policy reads is
//   eff_x = max(shadow_x, observed_x)
// and a stale snapshot is ignored (shadow only), as in the ES ablation's es1.
//
// Peer load (docs/scale-out.md, "The load plane"): other router replicas'
// in-flight requests on the engine, as their published deltas last said. It
// adds to this router's own counters before the max with the observed state:
//   eff_x = max(shadow_x + peer_x, observed_x)
// Peer counters are zero unless setPeerLoad() was called, so one router with
// no peers computes exactly what it did before they existed.
//
// Shadow meaning: `waiting` = dispatched, no first token yet (queued or
// prefilling); `running` = past the first token (decoding), so the shadow
// decode batch equals `running`; `prefillTokens` = uncached prompt tokens of
// requests still waiting; `activeBlocks` = prompt blocks of in-flight requests,
// the shadow of the engine's KV usage. Complexity: O(1) per call.
#pragma once

#include <cmath>
#include <cstdint>

namespace kvroute {

struct ShadowCounters {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t prefillTokens = 0;
  int64_t activeBlocks = 0;
};

// A snapshot from outside. NaN marks a field the source does not report.
struct ObservedState {
  bool present = false;
  double timestampMs = 0;
  double running = NAN;
  double waiting = NAN;
  double kvBlocksUsed = NAN;
  double kvBlocksTotal = NAN;
  double pendingPrefillTokens = NAN;
  double maxPrefillRemaining = NAN;
  double decodeBatch = NAN;
};

// The values a policy reads for one instance at one decision.
struct EffectiveState {
  double running;
  double waiting;
  double numRequests;  // running + waiting
  double pendingPrefill;
  double decodeBatch;
  double kvUsage;  // fraction of KV capacity in use by in-flight requests
};

inline bool isFresh(const ObservedState& o, double nowMs, double stalenessMs) {
  return o.present && nowMs - o.timestampMs <= stalenessMs;
}

namespace detail {
// max() that ignores an unreported (NaN) observation.
inline double atLeast(double shadow, double observed) { return observed > shadow ? observed : shadow; }
}  // namespace detail

// Writes the state in place, inline on purpose: returning the struct by value
// made the compiler build it on the stack with 8-byte stores and copy it out
// with 16-byte loads, a store-forwarding stall that cost more than everything
// else in an empty route().
// `peer` is nullptr while no instance has peer load (Router::peerCount_), so a
// router that is not a replica pays one predictable branch for the feature.
inline void effectiveStateInto(EffectiveState& e, const ShadowCounters& shadow, const ShadowCounters* peer,
                               const ObservedState& observed, bool fresh, double capacityBlocks) {
  int64_t running = shadow.running;
  int64_t waiting = shadow.waiting;
  int64_t prefill = shadow.prefillTokens;
  int64_t blocks = shadow.activeBlocks;
  if (peer != nullptr) {
    running += peer->running;
    waiting += peer->waiting;
    prefill += peer->prefillTokens;
    blocks += peer->activeBlocks;
  }
  e.running = static_cast<double>(running);
  e.waiting = static_cast<double>(waiting);
  e.pendingPrefill = static_cast<double>(prefill);
  e.decodeBatch = e.running;
  e.kvUsage = static_cast<double>(blocks) / capacityBlocks;
  if (fresh) {
    e.running = detail::atLeast(e.running, observed.running);
    e.waiting = detail::atLeast(e.waiting, observed.waiting);
    e.pendingPrefill = detail::atLeast(e.pendingPrefill, observed.pendingPrefillTokens);
    e.decodeBatch = detail::atLeast(e.decodeBatch, observed.decodeBatch);
    if (observed.kvBlocksTotal > 0) {
      e.kvUsage = detail::atLeast(e.kvUsage, observed.kvBlocksUsed / observed.kvBlocksTotal);
    }
  }
  e.numRequests = e.running + e.waiting;
}

}  // namespace kvroute
