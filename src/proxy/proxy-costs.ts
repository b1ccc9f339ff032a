/**
 * What prices each instance in the proxy beyond the router's own counters, fed by the exchange:
 * the learned per-instance costs (`serve --costs`, docs/proxy.md "Learned costs"), one
 * CostLearner (src/core/cost-learning/) on the proxy's router, read by /metrics, the dashboard
 * and the admin API; and the expected return of sessions idle between turns (a SessionReturns,
 * src/core/session-returns.ts; off with `serve --no-session-returns`).
 *
 * The learner always watches; the mode says whether it also prices the router:
 * - `learned` (default): a steering learner. Its prior becomes the fleet default and each
 *   observation pushes that instance's prefill cost and overhead into the core, so min_ttft
 *   scores predicted seconds per instance.
 * - `fixed`: a watching learner. Nothing is pushed; min_ttft keeps the preset's token-equivalents
 *   (reproducible), and the estimates are still shown, to compare.
 *
 * The prior is the H20 preset's coefficients (DEFAULT_COST_PRIOR), every time multiplied by
 * `--cost-prior-scale` (default 1): each estimate stays within 10× of its prior (the estimator's
 * clampRatio), so a fleet far faster or slower than the preset, such as `sim serve --speed 5`
 * engines, wants a prior near it (0.2 there).
 *
 * The feed, in the learner's call order (its header): routed() right after route() in
 * exchange/proxy-exchange.ts; firstToken() with the router's onFirstToken (the answer's first
 * body byte: a streamed answer's first chunk, which carries the first token, or a held body);
 * completed() when a 2xx answer ended, with its output tokens (outputTokens below); aborted() for
 * everything else: a client abort, an upstream failure, a retry's failed attempt, a 4xx/5xx
 * answer (an engine's refusal in a millisecond is not a first token). So only whole, successful
 * answers are observations.
 *
 * Threads (`serve --threads N`, docs/scale-out.md): every thread's ProxyState has its own learner,
 * fed by that thread's requests; all of them push into the one shared core, the last push of an
 * instance winning. Each learns from an even share of the traffic, so their estimates agree up
 * to noise. /metrics, the dashboard and the admin API are the main thread's, so they show the
 * main thread's learner.
 *
 * Hazard: the learner remembers at most 65,536 open tickets (the oldest forgotten first), so a
 * leak cannot grow it; every call here is O(1) and never throws into a request's path.
 */
import { CostLearner, DEFAULT_COST_PRIOR } from '../core/cost-learning/index.js';
import type { CostCoefficients, InstanceCostEstimate } from '../core/cost-learning/index.js';
import type { Router } from '../core/router.js';
import { SessionReturns } from '../core/session-returns.js';
import type { CostMode } from '../core/cost-learning/cost-mode.js';

export class ProxyCosts {
  private readonly learner: CostLearner;
  private readonly returns: SessionReturns | undefined;
  readonly mode: CostMode;

  /** `costPriorScale` multiplies the preset's times (`--cost-prior-scale`): 0.5 for engines twice as fast. */
  constructor(router: Router, options: { costs: CostMode; costPriorScale?: number; sessionReturns?: boolean }) {
    this.mode = options.costs;
    this.learner = new CostLearner(router, {
      steer: options.costs === 'learned',
      prior: scaledPrior(options.costPriorScale ?? 1),
    });
    if (options.sessionReturns !== false) this.returns = new SessionReturns(router);
  }

  /** Right before router.route() of a request of `session` ('' for none): its own return leaves its instance. */
  arriving(session: string): void {
    this.returns?.arriving(session === '' ? undefined : session);
  }

  /** Right after router.route() returned `ticket` (before anything else routes). */
  routed(ticket: number, session: string): void {
    this.learner.routed(ticket);
    this.returns?.routed(ticket, session === '' ? undefined : session);
  }

  /** The TTFT the learned costs predict for a routed, unfinished ticket, seconds; undefined if unknown. */
  predictedTtftSeconds(ticket: number): number | undefined {
    return this.learner.predictedTtftSeconds(ticket);
  }

  /** The ticket's first token (its answer's first body byte). */
  firstToken(ticket: number): void {
    this.learner.firstToken(ticket);
  }

  /** The ticket's answer ended: an observation when `success`, else forgotten. */
  ended(ticket: number, success: boolean, outputTokens: number | undefined): void {
    if (!success) {
      this.learner.aborted(ticket);
      this.returns?.aborted(ticket);
      return;
    }
    this.learner.completed(ticket, outputTokens === undefined ? {} : { outputTokens });
    this.returns?.completed(ticket);
  }

  /** A decode sample from an engine's /metrics (state/decode-time-samples.ts); an unknown instance is skipped. */
  observeDecode(instance: string, secondsPerToken: number, batch: number): void {
    try {
      this.learner.observeDecode(instance, secondsPerToken, batch);
    } catch {
      // The instance left while its scrape was out; a bad sample is no sample.
    }
  }

  /** Every instance's estimate, by id (its prior before any observation). */
  estimates(): Record<string, InstanceCostEstimate> {
    return this.learner.estimates();
  }
}

/** The H20 preset's coefficients with every time × `scale` (interference is a ratio: kept). */
export function scaledPrior(scale: number): CostCoefficients {
  const p = DEFAULT_COST_PRIOR;
  return {
    prefillSecondsPerToken: p.prefillSecondsPerToken * scale,
    prefillOverheadSeconds: p.prefillOverheadSeconds * scale,
    interference: p.interference,
    decodeStepSeconds: p.decodeStepSeconds * scale,
    decodeSecondsPerSequence: p.decodeSecondsPerSequence * scale,
  };
}
