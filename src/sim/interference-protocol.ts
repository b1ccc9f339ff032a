/**
 * The B2 prefill–decode interference protocol (constants and arithmetic only: the command
 * line imports it for its help), shared by the engine-model run
 * (`kvroute sim interference`, interference-bench.ts) and the run against live endpoints
 * (`kvroute bench interference`, src/live/interference-live.ts), so both measure the same thing:
 *
 * - a steady decode load on the decode endpoint: `decodePromptTokens`-token prompts asking for
 *   `decodeOutputTokens` tokens, `decodeRate` per second for `durationS`;
 * - `injections` large cold prefills (one output token) on the decode endpoint (`same`) or the
 *   other one (`different`), sent one at a time: the first at `injectionEveryS / 2`, each next one
 *   `injectionEveryS` after the previous one answered;
 * - every prompt unique, so nothing hits a prefix cache (the reference experiments' corrected driver);
 * - a decode request overlaps when its [first token, finish] interval touches an injection's
 *   [send, first token] window; the TTFT and TPOT indices are p90(overlapping) ÷ p90(clean).
 */
export interface InterferenceSchedule {
  durationS: number;
  decodeRate: number;
  decodePromptTokens: number;
  decodeOutputTokens: number;
  injections: number;
  injectionEveryS: number;
}

export const INTERFERENCE_SCHEDULE: InterferenceSchedule = {
  durationS: 60,
  decodeRate: 4,
  decodePromptTokens: 128,
  decodeOutputTokens: 64,
  injections: 4,
  injectionEveryS: 12,
};

export type InterferenceVariant = 'same' | 'different';

/** The B2 grid: both variants × these prefill sizes (tokens). */
export const INTERFERENCE_VARIANTS: readonly InterferenceVariant[] = ['different', 'same'];
export const INTERFERENCE_PREFILL_TOKENS: readonly number[] = [2048, 8192, 16384, 32768, 65536];

export interface InterferenceCell {
  variant: InterferenceVariant;
  prefill_tokens: number;
  n_overlap: number;
  n_clean: number;
  tpot_index: number | null;
  ttft_index: number | null;
}

/** One decode request's timing, in seconds on one clock. */
export interface DecodeTiming {
  sent: number;
  firstToken: number;
  finish: number;
  outputTokens: number;
}

function p90(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const rank = 0.9 * (sorted.length - 1);
  const low = Math.floor(rank);
  return sorted[low]! + (sorted[Math.min(low + 1, sorted.length - 1)]! - sorted[low]!) * (rank - low);
}

/**
 * The cell's counts and indices from the decodes' timings and the injections' [send, first
 * token] windows. A decode with fewer than two output tokens has no TPOT and counts for TTFT only.
 */
export function interferenceIndices(
  variant: InterferenceVariant,
  prefillTokens: number,
  decodes: readonly DecodeTiming[],
  windows: ReadonlyArray<readonly [number, number]>,
): InterferenceCell {
  const groups = {
    overlap: { ttft: [] as number[], tpot: [] as number[] },
    clean: { ttft: [] as number[], tpot: [] as number[] },
  };
  for (const d of decodes) {
    const overlaps = windows.some(([start, end]) => d.firstToken <= end && d.finish >= start);
    const group = overlaps ? groups.overlap : groups.clean;
    group.ttft.push(d.firstToken - d.sent);
    if (d.outputTokens > 1) group.tpot.push((d.finish - d.firstToken) / (d.outputTokens - 1));
  }
  const index = (overlap: number[], clean: number[]): number | null =>
    overlap.length === 0 || clean.length === 0 ? null : p90(overlap) / p90(clean);
  return {
    variant,
    prefill_tokens: prefillTokens,
    n_overlap: groups.overlap.ttft.length,
    n_clean: groups.clean.ttft.length,
    tpot_index: index(groups.overlap.tpot, groups.clean.tpot),
    ttft_index: index(groups.overlap.ttft, groups.clean.ttft),
  };
}
