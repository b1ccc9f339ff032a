/**
 * One instance's cost coefficients, learned online (docs/policies.md "Learned costs"). min_ttft
 * prices every instance with one engine preset's coefficients; a fleet that mixes GPU
 * generations, TP sizes or engine versions is not like that. This estimator starts from the
 * preset as a prior and follows what the instance really does.
 *
 * Two models, each fitted by robust RLS with forgetting (robust-rls.ts):
 *
 *   TTFT  = overhead + prefill × W × (1 + interference × n)
 *           W = pending_prefill + own, own = uncached × (1 + attentionWeight × (cached + uncached / 2))
 *           n = requests running or waiting on the instance at dispatch
 *   TPOT  = decodeStep + decodePerSequence × batch
 *
 * W and n are exactly what min_ttft's score reads (its score is W × (1 + batchWeight × n) in
 * token-equivalents), so `prefill` is seconds per token-equivalent and `interference` is the
 * instance's own batchWeight: overhead + prefill × (the score with interference for batchWeight)
 * is the predicted TTFT in seconds (predictTtftSeconds, without the KV term). The TTFT model
 * is linear in θ = (overhead, prefill, prefill × interference) over the regressors (1, W, W × n).
 * Both are fitted in log space (residual log(observed / predicted), regressors divided by the
 * prediction: Gauss-Newton on log ŷ), so residuals are relative errors, lognormal noise is
 * symmetric, and a 30 s prefill counts no more than a 0.1 s one.
 *
 * Tunables (CostEstimatorOptions): `forgetting` (0.98), `priorStrength` (2), `clip` (3) and
 * `persistence` (30) as in robust-rls.ts, and `clampRatio` (10): every coefficient stays within
 * [prior / ratio, prior × ratio] (overhead, interference and decodePerSequence within [0, …];
 * interference at most max(1, prior × ratio); a coefficient whose prior is 0 is measured against
 * a small floor), so no run of bad observations can take an estimate out of reason.
 * Inputs that are not finite, or not positive where a time or batch must be, are refused with a
 * RangeError naming the field, before anything changes.
 * Complexity: O(1) time and memory per observation (three and two parameters).
 */
import { invalidValue } from '../errors.js';
import { RobustRls, type RobustRlsOptions } from './robust-rls.js';

/** An instance's cost coefficients, in seconds. */
export interface CostCoefficients {
  /** Prefill seconds per token-equivalent (min_ttft's unit of work). */
  prefillSecondsPerToken: number;
  /** Seconds before a first token that do not grow with the work: a prefill step's overhead. */
  prefillOverheadSeconds: number;
  /** How much each request on the instance slows its prefill (min_ttft's batchWeight, per instance). */
  interference: number;
  /** Decode step seconds, its part that does not grow with the batch. */
  decodeStepSeconds: number;
  /** Decode step seconds added per sequence in the batch. */
  decodeSecondsPerSequence: number;
}

/**
 * The H20 preset's coefficients (docs/engine-model.md; src/sim/engine-preset.ts holds the same
 * numbers, and test/cost-learning.test.ts holds the two equal): 0.04518 ms per token, 35.0 ms
 * step overhead, min_ttft's default batchWeight 0.2, decode 5.529 ms + 0.4714 ms per sequence.
 */
export const DEFAULT_COST_PRIOR: Readonly<CostCoefficients> = Object.freeze({
  prefillSecondsPerToken: 0.04518e-3,
  prefillOverheadSeconds: 35.0e-3,
  interference: 0.2,
  decodeStepSeconds: 5.529e-3,
  decodeSecondsPerSequence: 0.4714e-3,
});

export interface CostEstimatorOptions extends RobustRlsOptions {
  clampRatio: number;
}

export const DEFAULT_ESTIMATOR_OPTIONS: Readonly<CostEstimatorOptions> = Object.freeze({
  forgetting: 0.98,
  priorStrength: 2,
  clip: 3,
  persistence: 30,
  clampRatio: 10,
});

/** What the estimator holds now, with its evidence. */
export interface InstanceCostEstimate extends CostCoefficients {
  /** 1 / prefillSecondsPerToken: the `kvroute_instance_prefill_tokens_per_second` figure. */
  prefillTokensPerSecond: number;
  ttftObservations: number;
  decodeObservations: number;
  /** Observations whose residual was clipped (outliers, or a real change being learned). */
  clippedObservations: number;
  /** Times a persistent run of clipped residuals (a real change, not a stall) reopened a fit. */
  reopened: number;
  /** The robust scale of the TTFT model's relative residuals (0.1: about 10% typical error). */
  ttftResidualScale: number;
}

/** One first token: the facts at dispatch and the time it took. */
export interface TtftObservation {
  ttftSeconds: number;
  /** Prefill tokens queued ahead of the request at dispatch. */
  pendingPrefillTokens: number;
  /** The request's own prefill in token-equivalents (`own` above). */
  ownTokens: number;
  /** Requests running or waiting on the instance at dispatch. */
  requests: number;
}

/** Decode time per output token at a batch size (a request's, or a /metrics histogram's mean). */
export interface DecodeObservation {
  secondsPerToken: number;
  batch: number;
}

/** The predicted TTFT in seconds of `W` token-equivalents with `requests` on the instance. */
export function predictTtftSeconds(c: CostCoefficients, workTokens: number, requests: number): number {
  return c.prefillOverheadSeconds + c.prefillSecondsPerToken * workTokens * (1 + c.interference * requests);
}

/** A scale for a parameter whose prior may be 0, so its relative unknown stays well-conditioned. */
const scaleOf = (prior: number, floor: number): number => (prior > 0 ? prior : floor);

function checkField(field: string, value: number, min: number, strict: boolean): void {
  const ok = Number.isFinite(value) && (strict ? value > min : value >= min);
  if (!ok) throw invalidValue(field, `a finite number ${strict ? '>' : '>='} ${min}`, value);
}

/** Checks a prior: every coefficient finite, prefill and decode step > 0, the rest >= 0. */
export function checkCostPrior(field: string, prior: CostCoefficients): void {
  checkField(`${field}.prefillSecondsPerToken`, prior.prefillSecondsPerToken, 0, true);
  checkField(`${field}.prefillOverheadSeconds`, prior.prefillOverheadSeconds, 0, false);
  checkField(`${field}.interference`, prior.interference, 0, false);
  checkField(`${field}.decodeStepSeconds`, prior.decodeStepSeconds, 0, true);
  checkField(`${field}.decodeSecondsPerSequence`, prior.decodeSecondsPerSequence, 0, false);
}

export class InstanceCostEstimator {
  private readonly ttft: RobustRls;
  private readonly decode: RobustRls;
  private readonly overheadScale: number;
  private readonly interferenceScale: number;
  private readonly z = new Float64Array(3);

  constructor(
    readonly prior: Readonly<CostCoefficients> = DEFAULT_COST_PRIOR,
    private readonly options: CostEstimatorOptions = DEFAULT_ESTIMATOR_OPTIONS,
  ) {
    checkCostPrior('prior', prior);
    this.overheadScale = scaleOf(prior.prefillOverheadSeconds, 1e-3);
    this.interferenceScale = scaleOf(prior.interference, 0.1);
    this.ttft = new RobustRls(
      [prior.prefillOverheadSeconds / this.overheadScale, 1, prior.interference / this.interferenceScale],
      options,
    );
    this.decode = new RobustRls([1, prior.decodeSecondsPerSequence > 0 ? 1 : 0], options);
  }

  /** Learns from one first token. Throws (naming the field) on a bad input, changing nothing. */
  observeTtft(o: TtftObservation): void {
    checkField('ttftSeconds', o.ttftSeconds, 0, true);
    checkField('pendingPrefillTokens', o.pendingPrefillTokens, 0, false);
    checkField('ownTokens', o.ownTokens, 0, false);
    checkField('requests', o.requests, 0, false);
    const work = o.pendingPrefillTokens + o.ownTokens;
    const p = this.prior.prefillSecondsPerToken;
    const z = this.z;
    z[0] = this.overheadScale;
    z[1] = p * work;
    z[2] = p * this.interferenceScale * work * o.requests;
    const predicted = Math.max(this.ttft.predict(z), 1e-9);
    for (let i = 0; i < 3; i += 1) z[i] = z[i]! / predicted;
    this.ttft.update(z, Math.log(o.ttftSeconds / predicted));
    this.clampTtft();
  }

  /** Learns from one decode time per token. Throws (naming the field) on a bad input, changing nothing. */
  observeDecode(o: DecodeObservation): void {
    checkField('secondsPerToken', o.secondsPerToken, 0, true);
    checkField('batch', o.batch, 1, false);
    const z = this.z;
    z[0] = this.prior.decodeStepSeconds;
    z[1] = scaleOf(this.prior.decodeSecondsPerSequence, 1e-4) * o.batch;
    const predicted = Math.max(this.decode.predict(z), 1e-9);
    z[0] /= predicted;
    z[1] /= predicted;
    this.decode.update(z, Math.log(o.secondsPerToken / predicted));
    const r = this.options.clampRatio;
    const phi = this.decode.phi;
    phi[0] = clamp(phi[0]!, 1 / r, r);
    phi[1] = clamp(phi[1]!, 0, this.prior.decodeSecondsPerSequence > 0 ? r : 1);
  }

  /**
   * predictTtftSeconds(estimate(), workTokens, requests), without making the estimate: a traced
   * request asks for it on every routing decision.
   */
  predictedTtftSeconds(workTokens: number, requests: number): number {
    const phi = this.ttft.phi;
    const prefill = phi[1]!;
    const interference = (phi[2]! * this.interferenceScale) / prefill;
    return (
      phi[0]! * this.overheadScale +
      prefill * this.prior.prefillSecondsPerToken * workTokens * (1 + interference * requests)
    );
  }

  estimate(): InstanceCostEstimate {
    const [overhead, prefill, slowdown] = this.ttft.phi;
    const prefillSecondsPerToken = prefill! * this.prior.prefillSecondsPerToken;
    return {
      prefillSecondsPerToken,
      prefillOverheadSeconds: overhead! * this.overheadScale,
      interference: (slowdown! * this.interferenceScale) / prefill!,
      decodeStepSeconds: this.decode.phi[0]! * this.prior.decodeStepSeconds,
      decodeSecondsPerSequence: this.decode.phi[1]! * scaleOf(this.prior.decodeSecondsPerSequence, 1e-4),
      prefillTokensPerSecond: 1 / prefillSecondsPerToken,
      ttftObservations: this.ttft.observations,
      decodeObservations: this.decode.observations,
      clippedObservations: this.ttft.clipped + this.decode.clipped,
      reopened: this.ttft.reopened + this.decode.reopened,
      ttftResidualScale: this.ttft.sigma,
    };
  }

  /** Keeps each TTFT coefficient within its range relative to the prior (see the header). */
  private clampTtft(): void {
    const r = this.options.clampRatio;
    const phi = this.ttft.phi;
    phi[0] = clamp(phi[0]!, 0, r);
    phi[1] = clamp(phi[1]!, 1 / r, r);
    // interference = φ₂ × scale / φ₁, within [0, max(1, prior × ratio)].
    const interferenceMax = Math.max(1, this.prior.interference * r);
    phi[2] = clamp(phi[2]!, 0, (interferenceMax * phi[1]!) / this.interferenceScale);
  }
}

const clamp = (value: number, low: number, high: number): number => (value < low ? low : value > high ? high : value);
