/**
 * When the root sessions of a synthetic trace start: the open-loop arrival process of
 * `kvroute trace synth --arrivals` (synth-plan.ts calls it; docs/synth.md#arrival-processes).
 *
 * Why: the default spreads root starts uniformly over `duration`, which is smooth. Routers are
 * also judged on rougher traffic: memoryless arrivals, and bursts separated by quiet periods.
 * Only the start times change; which sessions exist and what they send is drawn from other
 * streams, so the three processes give the same sessions at different times.
 *
 * Processes (n roots, duration D):
 * - `uniform`: n independent uniforms over [0, D), sorted (a Poisson process conditioned on its
 *   count). Drawn from the plan's own stream, exactly as before the option existed, so the
 *   default trace is byte-identical.
 * - `poisson`: exponential inter-arrival times of mean D / n (rate n / D), the first at 0 + one
 *   gap. The count is fixed (n); the last start lands near D, and may pass it.
 * - `on-off`: ON periods of `burstOn` seconds alternate with OFF periods of `burstOff`, ON first,
 *   from 0. A Poisson process runs on ON time only, at the rate n / (ON seconds in [0, D)) that
 *   keeps the same session count over about the same duration; each point is then mapped to
 *   wall time, skipping the OFF periods. No root starts in an OFF period.
 *
 * Hazards: `poisson` and `on-off` draw from their own seeded stream (ARRIVAL_STREAM), never the
 * plan's, so adding them changed no uniform trace. D = 0 puts every start at 0, as uniform does.
 *
 * Complexity: O(n) for poisson and on-off (already sorted), O(n log n) for uniform.
 */
import { mixSeed, SynthRandom } from './synth-random.js';

/** The arrival processes, the default first. */
export const ARRIVAL_PROCESSES = ['uniform', 'poisson', 'on-off'] as const;
export type ArrivalProcess = (typeof ARRIVAL_PROCESSES)[number];

/** Stream tag for mixSeed (synth-plan.ts owns 1 and 2). */
export const ARRIVAL_STREAM = 3;

export interface ArrivalSpec {
  process: ArrivalProcess;
  /** Seconds over which roots start. */
  duration: number;
  /** The trace seed. */
  seed: number;
  /** on-off only: seconds of each ON period (> 0). */
  burstOn: number;
  /** on-off only: seconds of each OFF period (>= 0). */
  burstOff: number;
}

/** Seconds of ON time in [0, duration) for ON periods of `on` and OFF periods of `off`. */
export function onSecondsWithin(duration: number, on: number, off: number): number {
  const period = on + off;
  const whole = Math.floor(duration / period);
  return whole * on + Math.min(on, duration - whole * period);
}

/** Wall time of the point `onTime` seconds into the ON time (OFF periods skipped). */
export function wallTimeOf(onTime: number, on: number, off: number): number {
  let periods = Math.floor(onTime / on);
  let into = onTime - periods * on;
  // The division may round across a period boundary; keep `into` in [0, on) so the point stays ON.
  if (into < 0) [periods, into] = [periods - 1, into + on];
  if (into >= on) [periods, into] = [periods + 1, into - on];
  return periods * (on + off) + Math.max(0, into);
}

/**
 * Fills `start` (length n, the root count) with non-decreasing start times of `spec`'s
 * non-uniform process. The uniform process is synth-plan.ts's own (it shares the plan stream).
 */
export function drawOpenLoopStarts(start: Float64Array, spec: ArrivalSpec): void {
  const n = start.length;
  if (n === 0) return;
  const rng = new SynthRandom(mixSeed(spec.seed, ARRIVAL_STREAM, 0));
  // Mean gap on the clock the process runs on: wall time (poisson) or ON time (on-off).
  const span = spec.process === 'on-off' ? onSecondsWithin(spec.duration, spec.burstOn, spec.burstOff) : spec.duration;
  const meanGap = span / n;
  let clock = 0;
  for (let r = 0; r < n; r += 1) {
    clock += -Math.log(1 - rng.next()) * meanGap; // 1 - u in (0, 1]: the log is finite
    start[r] = spec.process === 'on-off' ? wallTimeOf(clock, spec.burstOn, spec.burstOff) : clock;
  }
}
