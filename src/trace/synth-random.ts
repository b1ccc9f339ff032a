/**
 * Seeded randomness for the synthetic trace generator (src/trace/synth.ts).
 *
 * Why: a trace must be byte-identical for a given seed on every machine and Node version, so
 * nothing here touches `Math.random`, and everything is integer arithmetic on 32-bit words
 * (`Math.imul`, `>>>`) plus `Math.log`/`Math.exp`/`Math.sqrt`/`Math.cos`, which V8 computes
 * identically across platforms (fdlibm ports).
 *
 * Algorithm: mulberry32 (32-bit state, period 2^32) for the uniform stream, seeded through a
 * murmur3 finalizer (`mixSeed`) so neighbouring seeds give unrelated streams; Box–Muller for
 * normals; Acklam's rational approximation (relative error < 1.2e-9) for the inverse normal CDF
 * that stratified sampling needs.
 *
 * Invariant the generator relies on: one stream per session, seeded from (trace seed, session's
 * plan index). A session's draws therefore never depend on how sessions interleave, which is
 * what lets per-turn values be drawn lazily, only when a turn is emitted.
 */

const TWO_POW_32 = 4294967296;

/** murmur3's 32-bit finalizer: a bijection on 32-bit words with full avalanche. */
function fmix32(value: number): number {
  let h = value >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * A 32-bit stream seed from a trace seed (any safe non-negative integer: both 32-bit halves
 * count), a stream tag and an index within the stream.
 */
export function mixSeed(seed: number, stream: number, index: number): number {
  const low = seed >>> 0;
  const high = Math.floor(seed / TWO_POW_32) >>> 0;
  let h = fmix32(low ^ 0x9e3779b9);
  h = fmix32(h ^ high ^ 0x7f4a7c15);
  h = fmix32(h ^ (stream >>> 0));
  return fmix32(h ^ (index >>> 0) ^ 0x5bd1e995);
}

export class SynthRandom {
  private state: number;
  /** The second Box–Muller value, or NaN when none is pending. */
  private spare = Number.NaN;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1), 32 bits of resolution. */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / TWO_POW_32;
  }

  /** Uniform in [min, max). */
  uniform(min: number, max: number): number {
    return min + (max - min) * this.next();
  }

  /** Integer uniform in [min, max] (both inclusive; requires min <= max). */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  /** Standard normal (Box–Muller; pairs are produced together, the second is kept for the next call). */
  normal(): number {
    if (!Number.isNaN(this.spare)) {
      const value = this.spare;
      this.spare = Number.NaN;
      return value;
    }
    const u1 = 1 - this.next(); // (0, 1]: log(u1) is finite
    const u2 = this.next();
    const radius = Math.sqrt(-2 * Math.log(u1));
    this.spare = radius * Math.sin(2 * Math.PI * u2);
    return radius * Math.cos(2 * Math.PI * u2);
  }

  /** Log-normal with the given median (e^mu) and log-space standard deviation. */
  logNormal(median: number, sigma: number): number {
    return median * Math.exp(sigma * this.normal());
  }
}

/**
 * Inverse of the standard normal CDF for p in (0, 1) (Acklam). Used to turn stratified uniforms
 * into stratified log-normal draws.
 */
export function normalQuantile(p: number): number {
  const a = [
    -39.69683028665376, 220.9460984245205, -275.9285104469687, 138.357751867269, -30.66479806614716, 2.506628277459239,
  ];
  const b = [-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572];
  const c = [
    -0.007784894002430293, -0.3223964580411365, -2.400758277161838, -2.549732539343734, 4.374664141464968,
    2.938163982698783,
  ];
  const d = [0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416];
  const [a0, a1, a2, a3, a4, a5] = a as [number, number, number, number, number, number];
  const [b0, b1, b2, b3, b4] = b as [number, number, number, number, number];
  const [c0, c1, c2, c3, c4, c5] = c as [number, number, number, number, number, number];
  const [d0, d1, d2, d3] = d as [number, number, number, number];
  const low = 0.02425;
  if (p < low) {
    const q = Math.sqrt(-2 * Math.log(p));
    return (((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1);
  }
  if (p > 1 - low) {
    const q = Math.sqrt(-2 * Math.log(1 - p));
    return -(((((c0 * q + c1) * q + c2) * q + c3) * q + c4) * q + c5) / ((((d0 * q + d1) * q + d2) * q + d3) * q + 1);
  }
  const q = p - 0.5;
  const r = q * q;
  return (
    ((((((a0 * r + a1) * r + a2) * r + a3) * r + a4) * r + a5) * q) /
    (((((b0 * r + b1) * r + b2) * r + b3) * r + b4) * r + 1)
  );
}

/** Standard normal CDF (Abramowitz–Stegun 7.1.26 for erf; absolute error < 1.5e-7). */
export function normalCdf(x: number): number {
  const z = Math.abs(x) / Math.SQRT2;
  const t = 1 / (1 + 0.3275911 * z);
  const poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t;
  const erf = 1 - poly * Math.exp(-z * z);
  return x >= 0 ? 0.5 * (1 + erf) : 0.5 * (1 - erf);
}

/** 0 … count-1 in a uniformly random order (Fisher–Yates). */
export function shuffledIndices(rng: SynthRandom, count: number): Uint32Array {
  const order = new Uint32Array(count);
  for (let i = 0; i < count; i += 1) order[i] = i;
  for (let i = count - 1; i > 0; i -= 1) {
    const j = rng.int(0, i);
    const swap = order[i]!;
    order[i] = order[j]!;
    order[j] = swap;
  }
  return order;
}

/**
 * `count` stratified uniforms in (0, 1), in random order: value i lies in stratum perm(i) of
 * `count` equal strata. Compared with independent draws this removes most of the sampling noise
 * of a heavy-tailed quantity (turns per session) at small counts, so the defaults calibrate on
 * any seed. Memory: 12 bytes per value while building.
 */
export function stratifiedUniforms(rng: SynthRandom, count: number): Float64Array {
  const order = shuffledIndices(rng, count);
  const out = new Float64Array(count);
  // Strictly inside the stratum: normalQuantile(0) would be -Infinity.
  for (let i = 0; i < count; i += 1) out[i] = (order[i]! + 0.001 + 0.998 * rng.next()) / count;
  return out;
}
