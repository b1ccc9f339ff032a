/**
 * The fleet's predicted TTFT for a typical request (load shedding, docs/flow-control.md
 * "Shedding"): min_ttft's prediction at its best instance, for a request of `uncachedTokens`
 * the fleet holds none of. It reads what a decision reads (a dry run's candidate terms: queued
 * prefill, sessions returning, requests, and each instance's costs) and prices it as min_ttft
 * does (native/core/policies/scores.h, src/core/reference/engine-state.ts), leaving out the KV
 * pressure term: overhead + secondsPerToken × (pending + returning + uncached) × (1 +
 * interference × requests).
 *
 * Only costs in seconds make a TTFT: an instance priced in token-equivalents (no learned or
 * default costs yet) is left out, and with none in seconds the prediction is undefined (no
 * shedding on a guess). Cost: one dry run (an Explanation object), so callers cache it
 * (src/flow/load-shedder.ts predicts at most once per interval).
 */
import type { Router } from './router.js';

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
    const work =
      (terms.pendingPrefillTokens + terms.returningTokens + uncachedTokens) * (1 + terms.interference * terms.requests);
    best = Math.min(best, terms.prefillOverheadSeconds + terms.prefillSecondsPerToken * work);
  }
  return best === Infinity ? undefined : best * 1000;
}
