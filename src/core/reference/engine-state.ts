/**
 * Shadow counters and observed snapshots, the twin of native/core/engine-state.h:
 * while a snapshot is fresh each field the policy reads is max(shadow, observed),
 * with NaN (unreported) observations ignored.
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

export function effectiveState(
  shadow: ShadowCounters,
  observed: Observed | null,
  fresh: boolean,
  capacityBlocks: number,
): EffectiveState {
  let running = shadow.running;
  let waiting = shadow.waiting;
  let pendingPrefill = shadow.prefillTokens;
  let decodeBatch = shadow.running;
  let kvUsage = shadow.activeBlocks / capacityBlocks;
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

/** min_ttft's predicted TTFT in token-equivalents, the twin of minTtftScore in native/core/policies/scores.h. */
export function minTtftScore(
  e: EffectiveState,
  uncachedTokens: number,
  cachedTokens: number,
  addedKv: number,
  p: { batchWeight: number; attentionWeight: number; kvWeight: number; kvThreshold: number },
): number {
  const own = uncachedTokens * (1.0 + p.attentionWeight * (cachedTokens + uncachedTokens / 2.0));
  let score = (e.pendingPrefill + own) * (1.0 + p.batchWeight * e.numRequests);
  const over = e.kvUsage + addedKv - p.kvThreshold;
  if (p.kvWeight > 0 && over > 0) score *= 1.0 + p.kvWeight * over;
  return score;
}

export function kvWeightedScore(e: EffectiveState, uncachedTokens: number, decodeWeight: number): number {
  return lmetricScore(e, uncachedTokens, decodeWeight) * (1.0 + e.kvUsage);
}
