/**
 * Load shedding (docs/flow-control.md "Shedding"): when the fleet's predicted TTFT for a typical
 * request passes a class's bound, that class's new requests are refused at once (`shed`, 503
 * with Retry-After) rather than piled onto engines that cannot serve them in time.
 *
 * - The prediction is min_ttft's, at its best instance, for a request of `typicalTokens`
 *   uncached tokens (src/core/fleet-ttft.ts), made by the caller's `predict` and kept for
 *   `intervalMs` (one dry run per interval, not per request).
 * - Class k of n (0 is the highest) is shed past its `shedAtMs`, else past sloMs × (n − k) ÷ n:
 *   with high, normal, low and an SLO of 3 s, low is shed past 1 s, normal past 2 s and high
 *   past 3 s. So as the fleet fills, the lowest class goes first, and the highest only when even
 *   its requests would miss the SLO.
 * - No prediction (no instance priced in seconds yet): nothing is shed.
 *
 * Why a prediction rather than a fixed in-flight count: how many requests a fleet can hold
 * within an SLO depends on what they are (a 100k-token prefill against a 200-token one; cache
 * hits) and on the engines (mixed GPUs, learned costs). A count tuned for one mix overloads the
 * fleet on another, or idles it. The predicted TTFT is the queue the next request would wait
 * behind, in seconds, whatever the mix.
 */
import type { FlowConfig, SheddingConfig } from './flow-config.js';

export interface ShedRefusal {
  cause: 'shed';
  retryAfterMs: number;
  /** The fleet's predicted TTFT for a typical request, ms. */
  predictedMs: number;
  /** The class's bound it passed, ms. */
  boundMs: number;
}

export class LoadShedder {
  private predictedAt = -Infinity;
  private predicted: number | undefined;

  /** `predict(typicalTokens)`: the fleet's predicted TTFT in ms, or undefined when it cannot tell. */
  constructor(private readonly predict: (typicalTokens: number) => number | undefined) {}

  /** The prediction at `now` (ms), refreshed at most once per interval. */
  predictedTtftMs(shedding: SheddingConfig, now: number): number | undefined {
    if (now - this.predictedAt >= shedding.intervalMs) {
      this.predicted = this.predict(shedding.typicalTokens);
      this.predictedAt = now;
    }
    return this.predicted;
  }

  /** The refusal of a request of class `classRank` at `now`, or undefined when its class is not shed. */
  check(config: FlowConfig, classRank: number, now: number): ShedRefusal | undefined {
    const shedding = config.shedding;
    if (shedding === undefined) return undefined;
    const predictedMs = this.predictedTtftMs(shedding, now);
    if (predictedMs === undefined) return undefined;
    const boundMs = shedBoundMs(config, classRank);
    if (predictedMs <= boundMs) return undefined;
    // Retry once the queue ahead could have drained to the bound: the excess, at least a second.
    return { cause: 'shed', retryAfterMs: Math.max(1_000, predictedMs - boundMs), predictedMs, boundMs };
  }
}

/** The predicted TTFT past which class `rank` is shed, ms (Infinity without shedding). */
export function shedBoundMs(config: FlowConfig, rank: number): number {
  const shedding = config.shedding;
  if (shedding === undefined) return Infinity;
  const own = config.classes[rank]!.shedAtMs;
  if (own !== undefined) return own;
  const n = config.classes.length;
  return (shedding.sloMs * (n - rank)) / n;
}
