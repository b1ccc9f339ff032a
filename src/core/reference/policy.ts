/**
 * Policy decisions, the twin of native/core/policies/ (one file per policy) and Router::decide. Every rule
 * and tie-break is written out in docs/policies.md; keep the three in step.
 * Everything ranges over the request's candidates: the routable instances
 * serving its model group (all routable instances for a request without one).
 */
import { PolicyKind, Reason } from '../codes.js';
import type { CorePolicy } from '../core-router.js';
import { kvWeightedScore, lmetricScore, minTtftScore, type CostTerms, type EffectiveState } from './engine-state.js';
import type { ReferenceHashRing } from './hash-ring.js';
import type { ReferenceSessionTable, SessionPin } from './session-table.js';
import { xxhash64, xxhash64Id } from './xxhash64.js';

/** What one decision reads; arrays are indexed by slot. */
export interface DecisionContext {
  policy: CorePolicy;
  slotCount: number;
  /** Routable, and serving the request's model group. */
  candidate(slot: number): boolean;
  generation(slot: number): number;
  /** The instance's KV capacity in blocks. */
  capacity(slot: number): number;
  eff: EffectiveState[];
  /** The costs in force per candidate slot. */
  costs: CostTerms[];
  matched: Int32Array;
  uncached: number[];
  /** The request's input tokens (its uncached plus cached tokens on any instance). */
  inputTokens: number;
  scores: Float64Array;
  ids: readonly bigint[];
  hasSession: boolean;
  sessionKey: bigint;
  /** sticky's key for (session, model group): see pinKey(). */
  pinKey: bigint;
  dryRun: boolean;
  sessions: ReferenceSessionTable;
  ring: ReferenceHashRing;
  roundRobin(dryRun: boolean): number;
}

export interface DecisionResult {
  slot: number;
  reason: number;
}

function leastLoaded(c: DecisionContext): number {
  let best = -1;
  for (let s = 0; s < c.slotCount; s += 1) {
    if (!c.candidate(s)) continue;
    if (best < 0 || c.eff[s]!.numRequests < c.eff[best]!.numRequests) best = s;
  }
  return best;
}

function lowestScore(c: DecisionContext): number {
  let best = -1;
  for (let s = 0; s < c.slotCount; s += 1) {
    if (!c.candidate(s)) continue;
    if (best < 0 || c.scores[s]! < c.scores[best]!) best = s;
  }
  return best;
}

function fillScores(c: DecisionContext): void {
  const { kind, decodeWeight } = c.policy;
  const loadScores =
    kind === PolicyKind.RoundRobin ||
    kind === PolicyKind.SessionHash ||
    kind === PolicyKind.LoadOnly ||
    kind === PolicyKind.Sticky;
  for (let s = 0; s < c.slotCount; s += 1) {
    if (!c.candidate(s)) continue;
    const e = c.eff[s]!;
    if (loadScores) c.scores[s] = e.numRequests;
    else if (kind === PolicyKind.UnifiedKvBoth) c.scores[s] = kvWeightedScore(e, c.uncached[s]!, decodeWeight);
    else if (kind === PolicyKind.MinTtft)
      c.scores[s] = minTtftScore(
        e,
        c.uncached[s]!,
        c.inputTokens - c.uncached[s]!,
        c.ids.length / c.capacity(s),
        c.policy,
        c.costs[s]!,
      );
    else c.scores[s] = lmetricScore(e, c.uncached[s]!, decodeWeight);
  }
}

/** A pin is honoured while its instance is a candidate and still the one it was made to (Router::honoured). */
function honoured(c: DecisionContext, pin: SessionPin): boolean {
  return c.candidate(pin.slot) && c.generation(pin.slot) === pin.generation;
}

function sticky(c: DecisionContext): DecisionResult {
  if (!c.hasSession) return { slot: leastLoaded(c), reason: Reason.LeastLoaded };
  // One pin per (session, group); a pin is honoured only to a candidate.
  const pin = c.dryRun ? c.sessions.peek(c.pinKey) : c.sessions.lookup(c.pinKey);
  if (pin !== undefined && honoured(c, pin)) {
    return { slot: pin.slot, reason: Reason.Pinned };
  }
  const slot = leastLoaded(c);
  if (slot >= 0 && !c.dryRun) c.sessions.pin(c.pinKey, { slot, generation: c.generation(slot) });
  return { slot, reason: pin !== undefined ? Reason.Repinned : Reason.NewSession };
}

function unified(c: DecisionContext, kvBoth: boolean): DecisionResult {
  let best = -1;
  let loadSum = 0;
  let kvSum = 0;
  let candidateCount = 0;
  for (let s = 0; s < c.slotCount; s += 1) {
    if (!c.candidate(s)) continue;
    candidateCount += 1;
    const e = c.eff[s]!;
    loadSum += e.numRequests;
    kvSum += e.kvUsage;
    if (
      best < 0 ||
      c.matched[s]! > c.matched[best]! ||
      (c.matched[s] === c.matched[best] && e.numRequests < c.eff[best]!.numRequests)
    ) {
      best = s;
    }
  }
  if (best < 0) return { slot: -1, reason: Reason.RoundRobin };
  const n = c.ids.length;
  const ratio = n > 0 ? c.matched[best]! / n : 0;
  const meanLoad = loadSum / candidateCount;
  const meanKv = kvSum / candidateCount;
  const p = c.policy;
  let reason: number;
  if (!(ratio > p.affinityThreshold)) reason = Reason.Fallback;
  else if (!(c.eff[best]!.numRequests <= p.overloadFactor * meanLoad)) reason = Reason.Overload;
  else if (kvBoth && !(c.eff[best]!.kvUsage <= p.overloadFactor * meanKv)) reason = Reason.KvPressure;
  else return { slot: best, reason: Reason.Affinity };
  return { slot: lowestScore(c), reason };
}

/** min_ttft (docs/policies.md): the twin of native/core/policies/min-ttft.cc. */
function minTtft(c: DecisionContext): DecisionResult {
  const p = c.policy;
  let lowest = -1;
  let cached = -1;
  for (let s = 0; s < c.slotCount; s += 1) {
    if (!c.candidate(s)) continue;
    if (lowest < 0 || c.scores[s]! < c.scores[lowest]!) lowest = s;
    if (
      cached < 0 ||
      c.matched[s]! > c.matched[cached]! ||
      (c.matched[s] === c.matched[cached] && c.scores[s]! < c.scores[cached]!)
    )
      cached = s;
  }
  if (lowest < 0) return { slot: -1, reason: Reason.RoundRobin };
  const floor = c.scores[lowest]!;
  if (cached !== lowest && c.matched[cached]! > 0 && c.scores[cached]! <= floor * (1.0 + p.affinitySlack))
    return { slot: cached, reason: Reason.CacheSlack };
  const limit = floor * (1.0 + p.tieTolerance);
  let fewest = 0;
  let ties = 0;
  const tied = (s: number): boolean => c.candidate(s) && (s === lowest || c.scores[s]! <= limit);
  for (let s = 0; s < c.slotCount; s += 1) {
    if (!tied(s)) continue;
    const load = c.eff[s]!.numRequests;
    if (ties === 0 || load < fewest) {
      fewest = load;
      ties = 1;
    } else if (load === fewest) ties += 1;
  }
  if (ties <= 1 && c.eff[lowest]!.numRequests === fewest) return { slot: lowest, reason: Reason.MinTtft };
  let pick = Number(spreadKey(c) % BigInt(ties));
  for (let s = 0; s < c.slotCount; s += 1) {
    if (!tied(s) || c.eff[s]!.numRequests !== fewest) continue;
    if (pick-- === 0) return { slot: s, reason: Reason.Spread };
  }
  return { slot: -1, reason: Reason.Spread };
}

/** The key that breaks min_ttft's near-ties: the session's, else the first block's, else 0. */
function spreadKey(c: DecisionContext): bigint {
  if (c.hasSession) return c.sessionKey;
  return c.ids.length === 0 ? 0n : xxhash64Id(c.ids[0]!);
}

/**
 * sticky's pin key: the session key without a model group (-1); else XXH64 of the group id's four
 * little-endian bytes, seeded with the session key (pinKey in native/core/policies/policy-interface.cc).
 */
export function pinKey(sessionKey: bigint, group: number): bigint {
  if (group < 0) return sessionKey;
  const bytes = new Uint8Array(4);
  new DataView(bytes.buffer).setUint32(0, group, true);
  return xxhash64(bytes, sessionKey);
}

/** The policies ringFirstTurn applies to (Policy::readsRingFirstTurn in native/core/policies/). */
const READS_RING_FIRST_TURN: ReadonlySet<number> = new Set([
  PolicyKind.Sticky,
  PolicyKind.Lmetric,
  PolicyKind.Unified,
  PolicyKind.UnifiedKvBoth,
  PolicyKind.MinTtft,
]);

/**
 * The decision (Router::decide). With ringFirstTurn, a session this router has no honoured entry
 * for goes to its ring instance, which depends only on the instance ids, so every replica agrees;
 * a known one follows the policy, and its entry follows wherever the policy puts it.
 */
export function decide(c: DecisionContext): DecisionResult {
  fillScores(c);
  if (c.policy.ringFirstTurn !== 1 || !c.hasSession || !READS_RING_FIRST_TURN.has(c.policy.kind))
    return decidePolicy(c);
  const entry = c.dryRun ? c.sessions.peek(c.pinKey) : c.sessions.lookup(c.pinKey);
  const known = entry !== undefined && honoured(c, entry);
  const out = known
    ? decidePolicy(c)
    : { slot: c.ring.lookup(c.sessionKey, (s) => c.candidate(s)), reason: Reason.RingFirstTurn };
  if (out.slot >= 0 && !c.dryRun && (!known || out.slot !== entry.slot))
    c.sessions.pin(c.pinKey, { slot: out.slot, generation: c.generation(out.slot) });
  return out;
}

/** The policy's own choice (Router::decidePolicy); the scores are filled. */
function decidePolicy(c: DecisionContext): DecisionResult {
  switch (c.policy.kind) {
    case PolicyKind.RoundRobin:
      return { slot: c.roundRobin(c.dryRun), reason: Reason.RoundRobin };
    case PolicyKind.SessionHash: {
      if (!c.hasSession && c.ids.length === 0) return { slot: c.roundRobin(c.dryRun), reason: Reason.RoundRobin };
      const key = c.hasSession ? c.sessionKey : xxhash64Id(c.ids[0]!);
      return { slot: c.ring.lookup(key, (s) => c.candidate(s)), reason: Reason.SessionHash };
    }
    case PolicyKind.LoadOnly:
      return { slot: leastLoaded(c), reason: Reason.LeastLoaded };
    case PolicyKind.Lmetric:
      return { slot: lowestScore(c), reason: Reason.Lmetric };
    case PolicyKind.Sticky:
      return sticky(c);
    case PolicyKind.Unified:
      return unified(c, false);
    case PolicyKind.MinTtft:
      return minTtft(c);
    default:
      return unified(c, true);
  }
}
