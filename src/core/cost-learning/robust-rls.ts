/**
 * Robust recursive least squares with exponential forgetting: the fitting engine of the learned
 * per-instance costs (instance-cost-estimator.ts says what is fitted). It exists because the
 * costs must follow an instance online, in O(1) per observation, from a prior that holds before
 * any observation, without one stalled request dragging the fit.
 *
 * The parameters are relative to a prior: φ = θ ∘ scale⁻¹, started at `prior`, with covariance
 * P₀ = I / priorStrength, so every unknown is dimensionless and the prior weighs as much as
 * `priorStrength` exact observations of unit size. The caller linearises its model at each
 * observation (z: the gradient of log ŷ, e: log(y / ŷ), so residuals are relative and a
 * multiplicative noise is symmetric). Each observation updates:
 *
 *   h  = 1 if |e| ≤ clip·σ, else (clip·σ / e)²  full weight inside, redescending outside
 *   K  = P z / (λ / h + zᵀ P z)                 gain
 *   φ += K e                                    so an outlier moves φ by about |P z|·(clip·σ)² / |e|
 *   P  = (P − K zᵀ P) / λ                       then scaled down if trace(P) > trace(P₀)
 *   σ  = β σ + (1 − β) |e|                      only for a residual within clip·σ; σ in [σmin, σmax]
 *
 * A stall is a burst of clipped residuals; a real change of the instance is a run of them that
 * goes on. After `persistence` clipped residuals in a row of one sign, P is reset to P₀: the fit
 * reopens and re-converges at the prior's pace instead of the forgetting's.
 *
 * Tunables:
 * - `forgetting` λ in (0, 1]: an observation's weight decays by λ per later one, so the fit
 *   follows about 1 / (1 − λ) recent observations (0.98: 50). Lower follows drift faster and
 *   is noisier.
 * - `priorStrength`: how many observations' worth the prior weighs at the start (2); it also
 *   caps trace(P), so a stronger prior is slower to move and steadier under outliers.
 * - `clip`: residuals beyond clip·σ lose weight as 1 / e² (3), so the larger the outlier the
 *   less it moves the fit (a pure Huber weight, 1 / |e|, let 20 stalled requests 50× over
 *   their prediction move the prefill cost 9 to 23% over priorStrength 1 to 5; this weight,
 *   3%). Lower resists outliers harder and leans more on `persistence` to learn a jump.
 * - `persistence`: clipped residuals in a row, of one sign, that reopen the fit (30). A stall
 *   shorter than this moves the fit by a bounded amount; a change lasting longer is learned.
 * Hazards: a direction the observations never excite keeps its prior (the trace cap stops P
 * winding up there under forgetting); the caller clamps φ to its sane range after each update.
 * Complexity: O(k²) time per observation for k parameters (k ≤ 3 here), O(k²) memory.
 */

export interface RobustRlsOptions {
  forgetting: number;
  priorStrength: number;
  clip: number;
  persistence: number;
}

/** The relative residual scale before any observation, and its bounds. */
const SIGMA_START = 0.3;
const SIGMA_MIN = 0.05;
const SIGMA_MAX = 1;
/** β: the residual scale follows about 1 / (1 − β) = 20 observations. */
const SIGMA_DECAY = 0.95;

export class RobustRls {
  /** The parameters, relative to the caller's scale. */
  readonly phi: Float64Array;
  /** The robust scale of the relative residuals. */
  sigma = SIGMA_START;
  /** Observations taken, and how many of them had their residual clipped. */
  observations = 0;
  clipped = 0;
  /** Times a persistent run of clipped residuals reopened the fit. */
  reopened = 0;
  private readonly p: Float64Array;
  private readonly pz: Float64Array;
  private readonly maxTrace: number;
  /** Clipped residuals in a row, signed by their direction. */
  private clippedRun = 0;

  constructor(
    prior: readonly number[],
    private readonly options: RobustRlsOptions,
  ) {
    const k = prior.length;
    this.phi = Float64Array.from(prior);
    this.p = new Float64Array(k * k);
    for (let i = 0; i < k; i += 1) this.p[i * k + i] = 1 / options.priorStrength;
    this.maxTrace = k / options.priorStrength;
    this.pz = new Float64Array(k);
  }

  /** zᵀφ: the model's value at `z`. */
  predict(z: ArrayLike<number>): number {
    let sum = 0;
    for (let i = 0; i < this.phi.length; i += 1) sum += z[i]! * this.phi[i]!;
    return sum;
  }

  /** Takes one observation: z the linearised regressors, e the residual. Inputs are finite (the caller checks). */
  update(z: ArrayLike<number>, e: number): void {
    const k = this.phi.length;
    const { p, pz } = this;
    const { forgetting, clip } = this.options;
    const bound = clip * this.sigma;
    // Past the bound the weight falls as 1 / e², so the residual's effect (h·e) falls as 1 / |e|.
    const h = Math.abs(e) <= bound ? 1 : (bound / e) ** 2;
    if (h < 1) this.clipped += 1;
    let zpz = 0;
    for (let i = 0; i < k; i += 1) {
      let sum = 0;
      for (let j = 0; j < k; j += 1) sum += p[i * k + j]! * z[j]!;
      pz[i] = sum;
      zpz += z[i]! * sum;
    }
    const denom = forgetting / h + zpz;
    let trace = 0;
    for (let i = 0; i < k; i += 1) {
      const gain = pz[i]! / denom;
      this.phi[i] = this.phi[i]! + gain * e;
      // P is symmetric, so zᵀP = (Pz)ᵀ.
      for (let j = 0; j < k; j += 1) p[i * k + j] = (p[i * k + j]! - gain * pz[j]!) / forgetting;
      trace += p[i * k + i]!;
    }
    if (trace > this.maxTrace) {
      const shrink = this.maxTrace / trace;
      for (let i = 0; i < k * k; i += 1) p[i] = p[i]! * shrink;
    }
    if (h === 1) {
      this.clippedRun = 0;
      this.sigma = Math.min(SIGMA_MAX, Math.max(SIGMA_MIN, SIGMA_DECAY * this.sigma + (1 - SIGMA_DECAY) * Math.abs(e)));
    } else {
      this.clippedRun = e > 0 === this.clippedRun > 0 ? this.clippedRun + Math.sign(e) : Math.sign(e);
      if (Math.abs(this.clippedRun) >= this.options.persistence) this.reopen();
    }
    this.observations += 1;
  }

  /** P back to P₀: the fit follows the next observations at the prior's pace. */
  private reopen(): void {
    const k = this.phi.length;
    this.p.fill(0);
    for (let i = 0; i < k; i += 1) this.p[i * k + i] = 1 / this.options.priorStrength;
    this.clippedRun = 0;
    this.reopened += 1;
  }
}
