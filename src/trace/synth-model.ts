/**
 * The fixed shape of the synthetic agentic workload (src/trace/synth.ts): the distributions
 * behind session length, prompt growth, outputs and timing. docs/synth.md explains where each
 * value comes from and which calibration target it moves.
 *
 * Two session classes: quick tasks (1–8 turns, small prompts) and long-running agent loops
 * (9+ turns, large context from the start, kept between ~59k and ~128k tokens by compaction).
 * The mixture is what the window-1 numbers require: half the requests are under 20k tokens
 * while the mean is 44k, and a third of the requests lie past turn 8.
 *
 * These are constants rather than options: they were tuned jointly against the window-1 targets
 * (request count, input tokens, APC ceilings, the turn-cap tail and the KV-footprint
 * percentiles), and moving one alone breaks the others. The options in synth-options.ts are the
 * knobs that are meaningful on their own (counts, time window, seed, block size, prefix share,
 * context limit).
 */

export interface LogNormalSpec {
  /** e^mu: half the draws fall below it (before truncation or clamping). */
  median: number;
  /** Standard deviation of the log. */
  sigma: number;
  min: number;
  max: number;
}

export interface SessionClass {
  /**
   * Turns: ceil of a log-normal truncated to [min, max] (by quantile, so no mass piles up at
   * the bounds), drawn from stratified uniforms.
   */
  turns: LogNormalSpec;
  /**
   * Fresh tokens of a root session's first prompt (task, repo context, tool schemas); clamped,
   * and at most the context limit minus the system prefix.
   */
  initialTokens: LogNormalSpec;
  /** Tool-result tokens appended after each turn's output (file reads, test logs, diffs); clamped. */
  toolTokens: LogNormalSpec;
}

export interface SynthModel {
  /** Sessions of up to 8 turns. */
  short: SessionClass;
  /** Sessions of 9 or more turns. */
  long: SessionClass;
  /** Fraction of sessions in the long class (roots and sub-agents alike). */
  longShare: number;
  /** Generated tokens per turn (mostly tool calls); clamped. */
  outputTokens: LogNormalSpec;
  /**
   * Each turn the harness re-renders this fraction of the previous prompt's end (reminders,
   * refreshed or truncated tool output), uniform in [min, max]: the next prompt keeps only the
   * rest as a prefix. Decouples the fresh tokens per turn from the prompt's growth.
   */
  tailRewrite: { min: number; max: number };
  /**
   * A session compacts when its next prompt would exceed this fraction of the context limit,
   * uniform in [min, max] and drawn per compaction, capped at 1: the mass above 1 is sessions
   * whose harness only compacts when the engine would reject the prompt. Every prompt stays
   * within the limit.
   */
  compactionTrigger: { min: number; max: number };
  /**
   * A compacted prompt keeps a summary of this fraction of the context limit (fresh tokens).
   * With max <= 0.75 the summary plus the system prefix (<= 1/4 of the limit) always fits.
   */
  compactionSummary: { min: number; max: number };
  /** Instruction tokens a sub-agent appends to its parent's context. */
  subagentTaskTokens: { min: number; max: number };
  /** A sub-agent forks from its parent's prompt at turn 1..min(parent turns, this). */
  forkTurnMax: number;
  /**
   * At most this many sub-agents per parent. Must stay below the shared-prefix threshold (8
   * sessions): otherwise a busy parent's early context would count as a "shared" prefix.
   */
  maxForksPerParent: number;
  /** Seconds before the engine starts a request's first token (queueing + fixed overhead). */
  prefillBaseSeconds: number;
  /** Uncached prefill throughput; the known prefix is assumed cached. */
  prefillTokensPerSecond: number;
  /** Seconds per generated token. */
  decodeSecondsPerToken: number;
  /** Seconds the agent's tool runs between a turn's end and the next turn's arrival; clamped. */
  toolSeconds: LogNormalSpec;
  /** Seconds between the parent's turn ending and a forked sub-agent's first request. */
  spawnSeconds: { min: number; max: number };
}

export const SYNTH_MODEL: Readonly<SynthModel> = Object.freeze({
  short: {
    turns: { median: 1.8, sigma: 0.8, min: 1, max: 8 },
    initialTokens: { median: 6_300, sigma: 0.65, min: 500, max: 60_000 },
    toolTokens: { median: 1_500, sigma: 1.0, min: 16, max: 60_000 },
  },
  long: {
    turns: { median: 58, sigma: 0.45, min: 9, max: 200 },
    initialTokens: { median: 64_000, sigma: 0.3, min: 8_000, max: 100_000 },
    toolTokens: { median: 3_200, sigma: 1.0, min: 16, max: 60_000 },
  },
  longShare: 0.03,
  outputTokens: { median: 250, sigma: 1.0, min: 1, max: 8_192 },
  tailRewrite: { min: 0, max: 0.02 },
  compactionTrigger: { min: 0.5, max: 0.98 },
  compactionSummary: { min: 0.45, max: 0.48 },
  subagentTaskTokens: { min: 500, max: 3_000 },
  forkTurnMax: 2,
  maxForksPerParent: 3,
  prefillBaseSeconds: 0.15,
  prefillTokensPerSecond: 10_000,
  decodeSecondsPerToken: 0.02,
  toolSeconds: { median: 1.5, sigma: 1.0, min: 0.05, max: 60 },
  spawnSeconds: { min: 0.05, max: 0.5 },
});

/** A log-normal draw clamped to [min, max]: `draw` is a standard normal. */
export function clampedLogNormal(spec: LogNormalSpec, draw: number): number {
  return Math.min(spec.max, Math.max(spec.min, spec.median * Math.exp(spec.sigma * draw)));
}

/** `clampedLogNormal` rounded to whole tokens (min and max are integers, so it stays in range). */
export function logNormalTokens(spec: LogNormalSpec, draw: number): number {
  return Math.round(clampedLogNormal(spec, draw));
}
