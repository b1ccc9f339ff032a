/**
 * Numeric codes shared with the addon (native/core/policy.h). Values are stable:
 * append, never renumber. The addon reports its own counts and the loader
 * checks them against these tables.
 */

/** Policy names as the CLI and the reference experiments (docs/glossary.md) spell them, indexed by native PolicyKind. */
export const POLICY_KINDS = [
  'round_robin',
  'session_hash',
  'load_only',
  'lmetric',
  'sticky',
  'unified',
  'unified_kv_both',
  'min_ttft',
] as const;
export type PolicyKindName = (typeof POLICY_KINDS)[number];

/** Why an instance was chosen, indexed by native Reason. */
export const REASONS = [
  'round_robin',
  'session_hash',
  'least_loaded',
  'lmetric',
  'new_session',
  'pinned',
  'repinned',
  'affinity',
  'fallback',
  'overload',
  'kv_pressure',
  'min_ttft',
  'cache_slack',
  'spread',
  'ring_first_turn',
] as const;
export type ReasonName = (typeof REASONS)[number];

/** Reason codes the TypeScript reference writes (same numbers as REASONS). */
export const Reason = {
  RoundRobin: 0,
  SessionHash: 1,
  LeastLoaded: 2,
  Lmetric: 3,
  NewSession: 4,
  Pinned: 5,
  Repinned: 6,
  Affinity: 7,
  Fallback: 8,
  Overload: 9,
  KvPressure: 10,
  MinTtft: 11,
  CacheSlack: 12,
  Spread: 13,
  RingFirstTurn: 14,
} as const;

export const PolicyKind = {
  RoundRobin: 0,
  SessionHash: 1,
  LoadOnly: 2,
  Lmetric: 3,
  Sticky: 4,
  Unified: 5,
  UnifiedKvBoth: 6,
  MinTtft: 7,
} as const;

/**
 * What the offload layer decided (docs/policies.md "The offload layer"), indexed by native
 * OffloadOutcome (native/core/offload.h): the third entry of the decision array.
 */
export const OFFLOAD_OUTCOMES = [
  'off',
  'not_decoding',
  'below_threshold',
  'no_prefill_instance',
  'colocate',
  'offload',
] as const;

/** Offload outcome codes the TypeScript reference writes (same numbers as OFFLOAD_OUTCOMES). */
export const OffloadOutcomeCode = {
  Off: 0,
  NotDecoding: 1,
  BelowThreshold: 2,
  NoPrefillInstance: 3,
  Colocate: 4,
  Offload: 5,
} as const;
