/**
 * Per-second rolling windows for the dashboard: a request counter (rate) and a TTFT histogram
 * (p90), each over the last W seconds, with O(1) work per request and memory fixed at start.
 *
 * Algorithm: a ring of W one-second slots, each tagged with the whole second (floor(ms / 1000))
 * it holds. Adding into a slot whose tag is an older second clears it first, so a slot never
 * mixes two seconds and a quiet period needs no timer to age out: readers ignore slots whose
 * tag falls outside the window.
 *
 * TTFT values go into log-spaced bins (each bin `GROWTH` times wider than the last, from
 * `MIN_MS`), as HdrHistogram and DDSketch do: a quantile is reported as its bin's geometric
 * midpoint, so it is within ±(GROWTH-1)/2 ≈ 2% of the exact sample quantile, whatever the load.
 * Keeping raw samples would be exact but grow with the request rate.
 *
 * Tunables: the window length W (seconds, per instance of a class); MIN_MS and GROWTH below.
 * Cost: add() O(1); rate() O(W); quantile() O(W × BINS) = 30 × 420 adds once a second.
 */

/** Smallest distinguished latency (ms); anything below lands in bin 0. */
const MIN_MS = 0.1;
/** Ratio between consecutive bin edges: ~2% relative error at the midpoint. */
const GROWTH = 1.04;
/** Bins up to MIN_MS × GROWTH^BINS ≈ 24 minutes; longer samples land in the last bin. */
const BINS = 420;
const LOG_GROWTH = Math.log(GROWTH);

const second = (nowMs: number): number => Math.floor(nowMs / 1000);

/** Bin index of a latency sample (ms). */
export function binOf(ms: number): number {
  if (!(ms > MIN_MS)) return 0; // also NaN and negatives
  return Math.min(BINS - 1, Math.ceil(Math.log(ms / MIN_MS) / LOG_GROWTH));
}

/** Geometric midpoint of a bin (ms): the value a quantile in that bin reads as. */
export function binValue(bin: number): number {
  if (bin === 0) return MIN_MS;
  return MIN_MS * GROWTH ** (bin - 0.5);
}

function checkWindow(seconds: number): number {
  if (!Number.isSafeInteger(seconds) || seconds < 1 || seconds > 3600)
    throw new RangeError(`a dashboard window must be an integer number of seconds in 1..3600, got ${seconds}`);
  return seconds;
}

/** Events per second over the last W complete seconds. */
export class RateWindow {
  private readonly tags: Float64Array;
  private readonly counts: Float64Array;

  constructor(readonly seconds: number) {
    checkWindow(seconds);
    // W + 1 slots: the current (partial) second plus W complete ones.
    this.tags = new Float64Array(seconds + 1).fill(-1);
    this.counts = new Float64Array(seconds + 1);
  }

  add(nowMs: number, n = 1): void {
    const s = second(nowMs);
    const k = s % this.tags.length;
    if (this.tags[k] !== s) {
      this.tags[k] = s;
      this.counts[k] = 0;
    }
    this.counts[k]! += n;
  }

  /** Mean events per second over the W seconds before the current one. */
  rate(nowMs: number): number {
    const now = second(nowMs);
    let sum = 0;
    for (let k = 0; k < this.tags.length; k++) {
      const tag = this.tags[k]!;
      if (tag < now && tag >= now - this.seconds) sum += this.counts[k]!;
    }
    return sum / this.seconds;
  }
}

/** A latency quantile over the last W seconds, the current partial second included. */
export class QuantileWindow {
  private readonly tags: Float64Array;
  private readonly bins: Uint32Array;
  private readonly merged = new Float64Array(BINS);

  constructor(readonly seconds: number) {
    checkWindow(seconds);
    this.tags = new Float64Array(seconds).fill(-1);
    this.bins = new Uint32Array(seconds * BINS);
  }

  add(nowMs: number, valueMs: number): void {
    const s = second(nowMs);
    const k = s % this.tags.length;
    if (this.tags[k] !== s) {
      this.tags[k] = s;
      this.bins.fill(0, k * BINS, (k + 1) * BINS);
    }
    this.bins[k * BINS + binOf(valueMs)]!++;
  }

  /**
   * The q-quantile (0 < q ≤ 1) of the window's samples in ms (null when it has none), and how
   * many samples the window holds.
   */
  quantile(nowMs: number, q: number): { value: number | null; samples: number } {
    const now = second(nowMs);
    const merged = this.merged;
    merged.fill(0);
    let total = 0;
    for (let k = 0; k < this.tags.length; k++) {
      const tag = this.tags[k]!;
      if (tag > now || tag <= now - this.seconds) continue;
      const base = k * BINS;
      for (let b = 0; b < BINS; b++) {
        const c = this.bins[base + b]!;
        if (c !== 0) {
          merged[b]! += c;
          total += c;
        }
      }
    }
    if (total === 0) return { value: null, samples: 0 };
    // Nearest rank: the smallest bin with at least ceil(q × n) samples at or below it.
    const rank = Math.max(1, Math.ceil(q * total));
    let seen = 0;
    let bin = 0;
    while (bin < BINS - 1 && (seen += merged[bin]!) < rank) bin++;
    return { value: binValue(bin), samples: total };
  }
}
