#include "bindings/js-layout.h"

namespace kvroute {
namespace layout {

Napi::Object layoutObject(Napi::Env env) {
  Napi::Object o = Napi::Object::New(env);
  const auto set = [&](const char* name, double value) { o.Set(name, Napi::Number::New(env, value)); };
  set("REQUEST_INPUT_TOKENS", kRequestInputTokens);
  set("REQUEST_FLAGS", kRequestFlags);
  set("REQUEST_IDS_KIND", kRequestIdsKind);
  set("REQUEST_GROUP", kRequestGroup);
  set("REQUEST_BLOCK_TOKENS", kRequestBlockTokens);
  set("REQUEST_FIELDS", kRequestFields);
  set("FLAG_DRY_RUN", kFlagDryRun);
  set("FLAG_TOKEN_KEYS", kFlagTokenKeys);
  set("IDS_ARGUMENT", kIdsArgument);
  set("IDS_U64", kIdsU64);
  set("IDS_F64", kIdsF64);
  set("IDS_U32", kIdsU32);
  set("DECISION_SLOT", kDecisionSlot);
  set("DECISION_REASON", kDecisionReason);
  set("DECISION_OFFLOAD", kDecisionOffload);
  set("DECISION_PREFILL_SLOT", kDecisionPrefillSlot);
  set("DECISION_COLD_PAIR", kDecisionColdPair);
  set("DECISION_FIELDS", kDecisionFields);
  set("OFFLOAD_PREFILL_TICKET", kOffloadPrefillTicket);
  set("OFFLOAD_INTERFERENCE_MS", kOffloadInterferenceMs);
  set("OFFLOAD_TRANSFER_MS", kOffloadTransferMs);
  set("OFFLOAD_EXTRA_PREFILL_MS", kOffloadExtraPrefillMs);
  set("OFFLOAD_FIELDS", kOffloadFields);
  set("EVENT_FIRST_TOKEN", kEventFirstToken);
  set("EVENT_COMPLETE", kEventComplete);
  set("EVENT_ABORT", kEventAbort);
  set("TERM_PENDING_PREFILL", kTermPendingPrefill);
  set("TERM_REQUESTS", kTermRequests);
  set("TERM_KV_USAGE", kTermKvUsage);
  set("TERM_UNCACHED", kTermUncached);
  set("TERM_RETURNING", kTermReturning);
  set("TERM_SECONDS_PER_TOKEN", kTermSecondsPerToken);
  set("TERM_OVERHEAD", kTermOverhead);
  set("TERM_INTERFERENCE", kTermInterference);
  set("TERM_COUNT", kTermCount);
  set("COST_SECONDS_PER_TOKEN", kCostSecondsPerToken);
  set("COST_OVERHEAD_SECONDS", kCostOverheadSeconds);
  set("COST_INTERFERENCE", kCostInterference);
  set("COST_FIELDS", kCostFields);
  set("OBSERVED_FIELDS", kObservedFields);
  set("PEER_LOAD_FIELDS", kPeerLoadFields);
  set("STAT_FIELDS", kStatsFields);
  set("EVENT_STAT_FIELDS", kEventStatsFields);
  set("COUNT_FIELDS", kCountFields);
  set("LOCK_STAT_FIELDS", kLockStatFields);
  set("MAX_GROUPS", Router::kMaxGroups);
  set("MAX_REQUEST_IDS", kMaxRequestIds);
  set("PACKED_OP_STORED", kOpStored);
  set("PACKED_OP_REMOVED", kOpRemoved);
  set("PACKED_OP_CLEARED", kOpCleared);
  set("PACKED_OP_WORDS", kOpWords);
  set("PACKED_FLAG_PARENT", kFlagParent);
  set("PACKED_FLAG_OTHER_MEDIUM", kFlagOtherMedium);
  set("PACKED_FLAG_LORA", kFlagLora);
  set("PACKED_MAX_BLOCK_SIZE", kMaxBlockSize);
  const auto names = [&](const char* const* list, size_t n) {
    Napi::Object m = Napi::Object::New(env);
    for (size_t k = 0; k < n; ++k) m.Set(list[k], Napi::Number::New(env, static_cast<double>(k)));
    return m;
  };
  o.Set("Stat", names(kStatNames, kStatsFields));
  o.Set("EventStat", names(kEventStatNames, kEventStatsFields));
  return o;
}

}  // namespace layout
}  // namespace kvroute
