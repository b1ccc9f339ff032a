/**
 * Builds the allocation-heavy views of the router (explanations and stats)
 * from the typed arrays the core fills. Kept apart from router.ts so the hot
 * path stays small and these can grow fields freely.
 */
import { OFFLOAD_OUTCOMES, REASONS, type ReasonName } from './codes.js';
import {
  DECISION_COLD_PAIR,
  DECISION_OFFLOAD,
  DECISION_PREFILL_SLOT,
  OFFLOAD_EXTRA_PREFILL_MS,
  OFFLOAD_INTERFERENCE_MS,
  OFFLOAD_PREFILL_TICKET,
  OFFLOAD_TRANSFER_MS,
  Stat,
  TERM_COUNT,
  TERM_KV_USAGE,
  TERM_PENDING_PREFILL,
  TERM_REQUESTS,
  TERM_UNCACHED,
  TERM_RETURNING,
  TERM_SECONDS_PER_TOKEN,
  TERM_OVERHEAD,
  TERM_INTERFERENCE,
  type CoreRouter,
} from './core-router.js';
import type {
  CandidateTerms,
  Explanation,
  InstanceStats,
  KvEventInstanceStats,
  OffloadExplanation,
  PolicyName,
  ResolvedPolicy,
  RouterStats,
} from './types.js';

export interface DecisionSnapshot {
  policy: PolicyName;
  /** DECISION_FIELDS (core-router.ts). */
  decision: Int32Array;
  /** OFFLOAD_FIELDS (core-router.ts). */
  offload: Float64Array;
  /** The policy's offload threshold; null without the offload layer. */
  offloadThreshold: number | null;
  ticket: number;
  names: ReadonlyArray<string | undefined>;
  matched: Int32Array;
  scores: Float64Array;
  /** TERM_COUNT per slot (core-router.ts). */
  terms: Float64Array;
  drained(slot: number): boolean;
}

function termsAt(terms: Float64Array, slot: number): CandidateTerms {
  const at = TERM_COUNT * slot;
  return {
    pendingPrefillTokens: terms[at + TERM_PENDING_PREFILL]!,
    requests: terms[at + TERM_REQUESTS]!,
    kvUsage: terms[at + TERM_KV_USAGE]!,
    uncachedTokens: terms[at + TERM_UNCACHED]!,
    returningTokens: terms[at + TERM_RETURNING]!,
    prefillSecondsPerToken: terms[at + TERM_SECONDS_PER_TOKEN]!,
    prefillOverheadSeconds: terms[at + TERM_OVERHEAD]!,
    interference: terms[at + TERM_INTERFERENCE]!,
  };
}

/** The offload section of an explanation; null for a policy without the layer. */
function offloadSection(s: DecisionSnapshot, dryRun: boolean): OffloadExplanation | null {
  const code = s.decision[DECISION_OFFLOAD]!;
  if (s.offloadThreshold === null || code === 0) return null;
  const prefill = s.decision[DECISION_PREFILL_SLOT]!;
  const ticket = s.offload[OFFLOAD_PREFILL_TICKET]!;
  return {
    outcome: OFFLOAD_OUTCOMES[code]!,
    prefillInstance: prefill < 0 ? null : (s.names[prefill] ?? null),
    prefillTicket: dryRun || ticket < 0 ? null : ticket,
    interferenceMs: s.offload[OFFLOAD_INTERFERENCE_MS]!,
    transferMs: s.offload[OFFLOAD_TRANSFER_MS]!,
    extraPrefillMs: s.offload[OFFLOAD_EXTRA_PREFILL_MS]!,
    coldPair: s.decision[DECISION_COLD_PAIR] === 1,
    thresholdTokens: s.offloadThreshold,
  };
}

export function buildExplanation(
  s: DecisionSnapshot,
  dryRun: boolean,
  keys: Explanation['keys'],
  eventFed: (slot: number) => boolean,
): Explanation {
  const slot = s.decision[0]!;
  const candidates: Explanation['candidates'] = [];
  s.names.forEach((name, index) => {
    if (name === undefined) return;
    const score = s.scores[index]!;
    candidates.push({
      instance: name,
      index,
      drained: s.drained(index),
      matchedBlocks: s.matched[index]!,
      score: Number.isNaN(score) ? null : score,
      terms: Number.isNaN(score) ? null : termsAt(s.terms, index),
      matchedFrom: keys === 'tokens' && eventFed(index) ? 'events' : 'belief',
    });
  });
  return {
    policy: s.policy,
    instance: slot < 0 ? null : (s.names[slot] ?? null),
    reason: slot < 0 ? null : REASONS[s.decision[1]!]!,
    ticket: dryRun || s.ticket < 0 ? null : s.ticket,
    dryRun,
    keys,
    candidates,
    offload: offloadSection(s, dryRun),
  };
}

export interface StatsSources {
  core: CoreRouter;
  native: boolean;
  policy: ResolvedPolicy;
  names: ReadonlyArray<string | undefined>;
  /** Each slot's declared models (sorted); undefined: any model. */
  models: ReadonlyArray<readonly string[] | undefined>;
  statsBuf: Float64Array;
  countsBuf: Float64Array;
  /** The slot's KV event feed and index, or null when it has no event endpoint. */
  kvEvents: (slot: number) => KvEventInstanceStats | null;
}

const orNull = (x: number): number | null => (Number.isNaN(x) ? null : x);

export function buildRouterStats(src: StatsSources): RouterStats {
  const b = src.statsBuf;
  const instances: InstanceStats[] = [];
  src.names.forEach((name, index) => {
    if (name === undefined) return;
    src.core.stats(index, b);
    const models = src.models[index];
    instances.push({
      instance: name,
      index,
      drained: b[Stat.Drained] === 1,
      models: models === undefined ? null : [...models],
      capacityBlocks: b[Stat.CapacityBlocks]!,
      blocks: b[Stat.Blocks]!,
      segments: orNull(b[Stat.Segments]!),
      bytes: orNull(b[Stat.Bytes]!),
      shadow: {
        running: b[Stat.ShadowRunning]!,
        waiting: b[Stat.ShadowWaiting]!,
        prefillTokens: b[Stat.ShadowPrefillTokens]!,
        activeBlocks: b[Stat.ShadowActiveBlocks]!,
      },
      effective: {
        running: b[Stat.EffRunning]!,
        waiting: b[Stat.EffWaiting]!,
        numRequests: b[Stat.EffNumRequests]!,
        pendingPrefillTokens: b[Stat.EffPendingPrefill]!,
        decodeBatch: b[Stat.EffDecodeBatch]!,
        kvUsage: b[Stat.EffKvUsage]!,
      },
      observedFresh: b[Stat.ObservedFresh] === 1,
      routed: b[Stat.Routed]!,
      completed: b[Stat.Completed]!,
      aborted: b[Stat.Aborted]!,
      kvEvents: src.kvEvents(index),
    });
  });
  const reasons = new Float64Array(REASONS.length);
  src.core.reasonCounts(reasons);
  const decisions = Object.fromEntries(REASONS.map((r, k) => [r, reasons[k]!])) as Record<ReasonName, number>;
  src.core.counts(src.countsBuf);
  return {
    native: src.native,
    policy: src.policy,
    inFlight: src.countsBuf[0]!,
    sessions: src.countsBuf[1]!,
    fleetBytes: orNull(src.countsBuf[3]!),
    decisions,
    instances,
  };
}
