/**
 * The fleet's predicted TTFT for a typical request (load shedding, docs/flow-control.md
 * "Shedding"): min_ttft's prediction at its best instance, for a request of `uncachedTokens`
 * the fleet holds none of. It reads what a decision reads (a dry run's candidate terms: queued
 * prefill, sessions returning, requests, and each instance's costs) and prices it with min_ttft's
 * own score (minTtftScore, the twin of native/core/policies/scores.h), leaving out the attention
 * and KV-pressure terms: overhead + secondsPerToken × (pending + returning + uncached) × (1 +
 * interference × requests).
 *
 * Only costs in seconds make a TTFT: an instance priced in token-equivalents (no learned or
 * default costs yet) is left out, and with none in seconds the prediction is undefined (no
 * shedding on a guess). Cost: one dry run (an Explanation object), so callers cache it
 * (src/flow/load-shedder.ts predicts at most once per interval).
 */
import { minTtftScore } from './reference/engine-state.js';
import type { Router } from './router.js';

/** min_ttft's score without the attention and KV-pressure terms: the queue and the prefill alone. */
const QUEUE_ONLY = { attentionWeight: 0, kvWeight: 0, kvThreshold: 1 };

export function fleetPredictedTtftMs(router: Router, uncachedTokens: number): number | undefined {
  let best = Infinity;
  let explanation;
  try {
    explanation = router.explain({ hashIds: [], inputTokens: Math.max(1, uncachedTokens) });
  } catch {
    return undefined; // no instance that takes a request without a model, or none at all
  }
  for (const candidate of explanation.candidates) {
    const terms = candidate.terms;
    if (terms === null || router.instanceCosts(candidate.instance).costs === null) continue;
    const state = {
      running: 0,
      waiting: 0,
      decodeBatch: 0,
      numRequests: terms.requests,
      pendingPrefill: terms.pendingPrefillTokens,
      kvUsage: terms.kvUsage,
    };
    const costs = {
      secondsPerToken: terms.prefillSecondsPerToken,
      overheadSeconds: terms.prefillOverheadSeconds,
      interference: terms.interference,
      returningTokens: terms.returningTokens,
    };
    best = Math.min(best, minTtftScore(state, uncachedTokens, 0, 0, QUEUE_ONLY, costs));
  }
  return best === Infinity ? undefined : best * 1000;
}
