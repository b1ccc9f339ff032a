// js-layout — the typed-array layouts NativeRouter shares with TypeScript
// (src/core/core-router.ts): the request slab, decision and offload arrays,
// the ticket-event queue, the explain terms, the stats arrays, the packed KV
// events. The binding files index the arrays only through these constants.
//
// Why it exists: both sides hard-code the same offsets. layoutObject() exports
// every constant under its TypeScript name (the addon's `layout`), and
// src/core/native.ts refuses an addon whose layout differs from core-router.ts
// (layoutMismatch names the field), so a change made on one side only fails
// at load, not as silently misread numbers. Add a field in both places and in
// layoutObject(); test/native-layout.test.ts checks the export is complete.
#pragma once

#include <napi.h>

#include <cstddef>
#include <cstdint>

#include "core/block-index.h"
#include "core/event-index.h"
#include "core/router.h"

namespace kvroute {
namespace layout {

// Request slab (Float64Array): [inputTokens or NaN, flags, ids kind, group or -1, blockTokens or NaN].
constexpr size_t kRequestInputTokens = 0;
constexpr size_t kRequestFlags = 1;
constexpr size_t kRequestIdsKind = 2;
constexpr size_t kRequestGroup = 3;
constexpr size_t kRequestBlockTokens = 4;
constexpr size_t kRequestFields = 5;
// Request flags: a bitmask.
constexpr uint32_t kFlagDryRun = 1;
constexpr uint32_t kFlagTokenKeys = 2;
constexpr uint32_t kFlagsKnown = kFlagDryRun | kFlagTokenKeys;
// The ids kind the request names (the route() fast path); 0: not a typed array.
constexpr double kIdsArgument = 0;
constexpr double kIdsU64 = 1;
constexpr double kIdsF64 = 2;
constexpr double kIdsU32 = 3;
// Decision (Int32Array): [slot, reason, offload outcome, prefill slot, cold pair].
constexpr size_t kDecisionSlot = 0;
constexpr size_t kDecisionReason = 1;
constexpr size_t kDecisionOffload = 2;
constexpr size_t kDecisionPrefillSlot = 3;
constexpr size_t kDecisionColdPair = 4;
constexpr size_t kDecisionFields = 5;
// Offload (Float64Array): [prefill ticket, interference ms, transfer ms, extra prefill ms].
// Past the outcome, decision and offload entries are written only when the outcome is not off.
constexpr size_t kOffloadPrefillTicket = 0;
constexpr size_t kOffloadInterferenceMs = 1;
constexpr size_t kOffloadTransferMs = 2;
constexpr size_t kOffloadExtraPrefillMs = 3;
constexpr size_t kOffloadFields = 4;
// Ticket-event queue (Float64Array): [count, ticket0, kind0, ticket1, kind1, ...].
// JavaScript validates tickets and appends first-token/complete/abort events
// without crossing into the addon; every method drains the queue before it
// reads or changes state, so decisions see exactly the eager result.
constexpr double kEventFirstToken = 1;
constexpr double kEventComplete = 2;
constexpr double kEventAbort = 3;
// Fixed-size outputs.
constexpr size_t kObservedFields = 8;  // ObservedState, in its field order
constexpr size_t kPeerLoadFields = 4;  // setPeerLoad: ShadowCounters, in its field order
// setInstanceCosts: [secondsPerToken, overheadSeconds, interference] (core/instance-costs.h).
constexpr size_t kCostSecondsPerToken = 0;
constexpr size_t kCostOverheadSeconds = 1;
constexpr size_t kCostInterference = 2;
constexpr size_t kCostFields = 3;
constexpr size_t kStatsFields = 19;      // js-router-stats.cc Stats(), kStatNames order
constexpr size_t kEventStatsFields = 9;  // js-router-events.cc EventStats(), kEventStatNames order
constexpr size_t kCountFields = 4;       // [open tickets, sessions, slots, fleet bytes]
constexpr size_t kLockStatFields = 4;    // see JsRouter::LockStats
constexpr size_t kMaxRequestIds = BlockIndex::kMaxDepth;

// The stats arrays' entries in order, by their TypeScript names (Stat, EventStat).
constexpr const char* kStatNames[kStatsFields] = {
    "CapacityBlocks",
    "Blocks",
    "Segments",
    "Bytes",
    "ShadowRunning",
    "ShadowWaiting",
    "ShadowPrefillTokens",
    "ShadowActiveBlocks",
    "EffRunning",
    "EffWaiting",
    "EffPendingPrefill",
    "EffDecodeBatch",
    "EffKvUsage",
    "ObservedFresh",
    "Routed",
    "Completed",
    "Aborted",
    "Drained",
    "EffNumRequests",
};
constexpr const char* kEventStatNames[kEventStatsFields] = {
    "Stored", "Removed", "Cleared", "Ignored", "Orphaned", "UnknownRemoved", "HeldKeys", "EngineBlocks", "EventFed",
};

// Every constant above (and the core's that cross: kTerm*, Router::kMaxGroups,
// the packed-event codes) under its TypeScript name, plus `Stat` and
// `EventStat` as name -> index objects.
Napi::Object layoutObject(Napi::Env env);

}  // namespace layout
}  // namespace kvroute
