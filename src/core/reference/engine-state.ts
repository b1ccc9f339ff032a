/**
 * Shadow counters and observed snapshots, the twin of native/core/engine-state.h:
 * while a snapshot is fresh each field the policy reads is max(shadow, observed),
 * with NaN (unreported) observations ignored. Other replicas' load (setPeerLoad) adds to the
 * router's own counters first: max(shadow + peer, observed).
 */

export interface ShadowCounters {
  running: number;
  waiting: number;
  prefillTokens: number;
  activeBlocks: number;
}

export interface Observed {
  timestampMs: number;
  running: number;
  waiting: number;
  kvBlocksUsed: number;
  kvBlocksTotal: number;
  pendingPrefillTokens: number;
  maxPrefillRemaining: number;
  decodeBatch: number;
}

export interface EffectiveState {
  running: number;
  waiting: number;
  numRequests: number;
  pendingPrefill: number;
  decodeBatch: number;
  kvUsage: number;
}

export const isFresh = (o: Observed | null, nowMs: number, stalenessMs: number): boolean =>
  o !== null && nowMs - o.timestampMs <= stalenessMs;

// max() that ignores NaN, written like the C++ so the two agree bit for bit.
const atLeast = (shadow: number, observed: number): number => (observed > shadow ? observed : shadow);

export const emptyShadow = (): ShadowCounters => ({ running: 0, waiting: 0, prefillTokens: 0, activeBlocks: 0 });

export function effectiveState(
  shadow: ShadowCounters,
  peer: ShadowCounters,
  observed: Observed | null,
  fresh: boolean,
  capacityBlocks: number,
): EffectiveState {
  let running = shadow.running + peer.running;
  let waiting = shadow.waiting + peer.waiting;
  let pendingPrefill = shadow.prefillTokens + peer.prefillTokens;
  let decodeBatch = running;
  let kvUsage = (shadow.activeBlocks + peer.activeBlocks) / capacityBlocks;
  if (fresh && observed !== null) {
    running = atLeast(running, observed.running);
    waiting = atLeast(waiting, observed.waiting);
    pendingPrefill = atLeast(pendingPrefill, observed.pendingPrefillTokens);
    decodeBatch = atLeast(decodeBatch, observed.decodeBatch);
    if (observed.kvBlocksTotal > 0) kvUsage = atLeast(kvUsage, observed.kvBlocksUsed / observed.kvBlocksTotal);
  }
  return { running, waiting, numRequests: running + waiting, pendingPrefill, decodeBatch, kvUsage };
}

/** LMetric, the twin of lmetricScore in native/core/policies/scores.h. */
export function lmetricScore(e: EffectiveState, uncachedTokens: number, decodeWeight: number): number {
  let batch = e.numRequests - (1.0 - decodeWeight) * e.decodeBatch;
  if (batch < 0) batch = 0;
  return (e.pendingPrefill + uncachedTokens) * (batch + 1.0);
}

/**
 * The costs min_ttft prices one candidate with (native/core/instance-costs.h): without costs
 * pushed, (1, 0, the policy's batchWeight), token-equivalents.
 */
export interface CostTerms {
  secondsPerToken: number;
  overheadSeconds: number;
  interference: number;
  /** Expected prefill of sessions idle on the instance between turns. */
  returningTokens: number;
}

/**
 * min_ttft's predicted TTFT in the unit of the instance's costs (seconds with learned costs,
 * token-equivalents without), the twin of minTtftScore in native/core/policies/scores.h.
 */
export function minTtftScore(
  e: EffectiveState,
  uncachedTokens: number,
  cachedTokens: number,
  addedKv: number,
  p: { attentionWeight: number; kvWeight: number; kvThreshold: number },
  c: CostTerms,
): number {
  const own = uncachedTokens * (1.0 + p.attentionWeight * (cachedTokens + uncachedTokens / 2.0));
  const work = (e.pendingPrefill + c.returningTokens + own) * (1.0 + c.interference * e.numRequests);
  let score = c.overheadSeconds + c.secondsPerToken * work;
  const over = e.kvUsage + addedKv - p.kvThreshold;
  if (p.kvWeight > 0 && over > 0) score *= 1.0 + p.kvWeight * over;
  return score;
}

export function kvWeightedScore(e: EffectiveState, uncachedTokens: number, decodeWeight: number): number {
  return lmetricScore(e, uncachedTokens, decodeWeight) * (1.0 + e.kvUsage);
}
