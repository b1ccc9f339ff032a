// js-router-policy — the policy crossing into C++: readPolicy() turns the
// TypeScript policy description (kind, tunables, the offload layer's cost
// model) into a PolicyConfig, for the constructor and setPolicy(); setTime()
// drives the manual clock. TypeScript validates first; these re-checks only
// keep garbage out of the core.
#include <limits>
#include <string>

#include "bindings/js-router.h"
#include "bindings/napi-util.h"

namespace kvroute {

namespace {

// policy.offload: null (no layer) or every OffloadCostModel field, checked by
// resolveOffloadCost in TypeScript first; this re-check only keeps garbage out.
void readOffload(const Napi::Value& v, PolicyConfig& p) {
  p.offload = false;
  if (v.IsNull() || v.IsUndefined()) return;
  if (!v.IsObject()) throwTypeError(v.Env(), kErrArgType, "policy.offload must be null or an object");
  const Napi::Object o = v.As<Napi::Object>();
  constexpr double kMax = std::numeric_limits<double>::max();
  const auto field = [&](const char* name, bool positive) {
    const std::string path = std::string("policy.offload.") + name;
    const double x = requireInRange(o.Get(name), path.c_str(), 0, kMax);
    if (positive && !(x > 0)) throwRangeError(v.Env(), kErrArgValue, path + " must be > 0");
    return x;
  };
  OffloadCostModel& m = p.offloadCost;
  m.thresholdTokens = field("thresholdTokens", false);
  m.linkGbps = field("linkGbps", true);
  m.warmOverheadMs = field("warmOverheadMs", false);
  m.coldPenaltyMs = field("coldPenaltyMs", false);
  if (!o.Get("layerwise").IsBoolean())
    throwTypeError(v.Env(), kErrArgType, "policy.offload.layerwise must be a boolean");
  m.layerwise = o.Get("layerwise").As<Napi::Boolean>().Value();
  m.layers = field("layers", true);
  m.kvBytesPerToken = field("kvBytesPerToken", true);
  m.stepOverheadMs = field("stepOverheadMs", false);
  m.prefillMsPerToken = field("prefillMsPerToken", false);
  m.attentionMsPerToken2 = field("attentionMsPerToken2", false);
  m.chunkTokens = field("chunkTokens", true);
  if (!o.Get("chargePrefill").IsBoolean())
    throwTypeError(v.Env(), kErrArgType, "policy.offload.chargePrefill must be a boolean");
  m.chargePrefill = o.Get("chargePrefill").As<Napi::Boolean>().Value();
  p.offload = true;
}

}  // namespace

PolicyConfig readPolicy(const Napi::Object& spec) {
  PolicyConfig p;
  const double kind = requireInteger(spec.Get("kind"), "policy.kind", 0, kPolicyKindCount - 1);
  p.kind = static_cast<PolicyKind>(static_cast<int32_t>(kind));
  p.affinityThreshold = requireInRange(spec.Get("affinityThreshold"), "policy.affinityThreshold", 0, 1);
  p.overloadFactor = requireInRange(spec.Get("overloadFactor"), "policy.overloadFactor", 0, 1e9);
  p.decodeWeight = requireInRange(spec.Get("decodeWeight"), "policy.decodeWeight", 0, 1);
  p.ringVnodes = static_cast<uint32_t>(requireInteger(spec.Get("ringVnodes"), "policy.ringVnodes", 1, 65536));
  p.batchWeight = requireInRange(spec.Get("batchWeight"), "policy.batchWeight", 0, 1e3);
  p.attentionWeight = requireInRange(spec.Get("attentionWeight"), "policy.attentionWeight", 0, 1);
  p.affinitySlack = requireInRange(spec.Get("affinitySlack"), "policy.affinitySlack", 0, 1e3);
  p.tieTolerance = requireInRange(spec.Get("tieTolerance"), "policy.tieTolerance", 0, 1);
  p.kvWeight = requireInRange(spec.Get("kvWeight"), "policy.kvWeight", 0, 1e3);
  p.kvThreshold = requireInRange(spec.Get("kvThreshold"), "policy.kvThreshold", 0, 10);
  p.ringFirstTurn = requireInteger(spec.Get("ringFirstTurn"), "policy.ringFirstTurn", 0, 1) == 1;
  readOffload(spec.Get("offload"), p);
  return p;
}

Napi::Value JsRouter::SetTime(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  core().setTime(requireInRange(info[0], "nowMs", -1e15, 1e15));
  return info.Env().Undefined();
}

Napi::Value JsRouter::SetPolicy(const Napi::CallbackInfo& info) {
  const auto lock = exclusive();
  if (!info[0].IsObject()) throwTypeError(info.Env(), kErrArgType, "policy must be an object");
  core().setPolicy(readPolicy(info[0].As<Napi::Object>()));
  return info.Env().Undefined();
}

}  // namespace kvroute
