/**
 * Exact percentiles by linear interpolation between closest ranks (numpy's default), so
 * figures compare one-to-one with the reference experiments' Python analysis.
 */
export function percentileOfSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return 0;
  const rank = (p / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.min(low + 1, sorted.length - 1);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (rank - low);
}

export interface Spread {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Sorts `values` in place and returns p50/p90/p99/max. */
export function spread(values: Float64Array | Uint32Array): Spread {
  values.sort();
  return {
    p50: percentileOfSorted(values, 50),
    p90: percentileOfSorted(values, 90),
    p99: percentileOfSorted(values, 99),
    max: values.length === 0 ? 0 : values[values.length - 1]!,
  };
}
