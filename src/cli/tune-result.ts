/**
 * What `kvroute tune` reports (--json prints it, --out writes it; docs/tune.md has every key):
 * every evaluated point, the best, and its margins:
 * - against the policy's defaults and against the runner-up (the second-lowest objective):
 *   the other's objective minus the best's, absolute and relative to the other's;
 * - per parameter, the smallest and largest value it takes among the evaluated points whose
 *   objective is within WITHIN (2 %) of the best's. These are points of the search, where the
 *   other parameters vary too, not a one-parameter-at-a-time scan.
 */
import type { PolicySpec } from '../core/types.js';
import { kvrouteVersion } from '../trace/run-header.js';
import { fleetRecord } from './fleet-options.js';
import type { FlowFields } from './flow-flags.js';
import { aggregate, OBJECTIVES } from './tune-objectives.js';
import type { TuneOptions } from './tune-options.js';
import type { Point, Round } from './tune-search.js';
import { counted } from './counted.js';

/** The tolerance of the margins' intervals: objectives at most this much above the best's. */
export const WITHIN = 0.02;

/** A searched point with its figures. */
export interface Evaluated {
  /** 1, 2, … in the order the search made them. */
  id: number;
  round: 1 | 2;
  point: Point;
  /** The objective's metric on each --trace, in order. */
  perTrace: number[];
  /** Their mean, or the worst (--aggregate). */
  objective: number;
}

export interface Setting {
  params: Record<string, number>;
  per_trace: number[];
  objective: number;
}

export interface Margin {
  /** The other setting's objective. */
  objective: number;
  /** The other's objective minus the best's: positive when the best is better. */
  delta: number;
  /** `delta` ÷ the other's objective; null when that is 0. */
  relative: number | null;
}

export interface TuneResult {
  format: 'kvroute-tune';
  version: 1;
  kvroute_version: string;
  command: string[];
  started_at: string;
  policy: string;
  objective: { name: string; unit: string; aggregate: string };
  search: {
    /** The method in words, as the text output prints it. */
    method: string;
    seed: number;
    samples: number;
    refine: number;
    rounds: Array<{ round: number; method: string; points: number }>;
    simulations: number;
  };
  params: Array<{ name: string; lo: number; hi: number; integer: boolean; default: number }>;
  /** `fleet`: a mixed fleet's spec (--fleet), absent for a uniform one; `flow`: flow control, absent without. */
  setup: { instances: number; preset: string; engine_state: string; fleet?: string; flow?: FlowFields };
  traces: TraceRef[];
  points: Array<Setting & { id: number; round: number }>;
  defaults: Setting;
  best: Setting & { id: number; spec: PolicySpec };
  margins: {
    vs_defaults: Margin;
    vs_runner_up: (Margin & { id: number }) | null;
    within: number;
    intervals: Array<{ name: string; lo: number; hi: number; points: number }>;
  };
  holdout: {
    traces: TraceRef[];
    best: { per_trace: number[]; objective: number };
    defaults: { per_trace: number[]; objective: number };
    vs_defaults: Margin;
  } | null;
  wall_s: number;
}

export interface TraceRef {
  path: string;
  fingerprint: string;
  requests: number;
}

export interface ResultInput {
  options: TuneOptions;
  startedAt: Date;
  rounds: readonly Round[];
  /** Every searched point, ids 1… in order. */
  points: readonly Evaluated[];
  defaults: { point: Point; perTrace: number[] };
  holdout: { best: number[]; defaults: number[] } | undefined;
  fingerprints: ReadonlyMap<string, { fingerprint: string; requests: number }>;
  /** Simulations run (a setting met twice on a trace runs once). */
  simulations: number;
  wallSeconds: number;
}

export function tuneResult(input: ResultInput): TuneResult {
  const { options, points } = input;
  const names = options.params.map((range) => range.name);
  const paramsOf = (point: Point): Record<string, number> => Object.fromEntries(names.map((n, i) => [n, point[i]!]));
  const combine = (values: readonly number[]): number => aggregate(options.aggregate, values);
  const ranked = [...points].sort((a, b) => a.objective - b.objective || a.id - b.id);
  const best = ranked[0]!;
  const runnerUp = ranked[1];
  const defaults: Setting = {
    params: paramsOf(input.defaults.point),
    per_trace: input.defaults.perTrace,
    objective: combine(input.defaults.perTrace),
  };
  const traceRef = (path: string): TraceRef => ({ path, ...input.fingerprints.get(path)! });
  const spec: PolicySpec = { name: options.policy, ...paramsOf(best.point) };
  const holdout = input.holdout === undefined ? null : holdoutResult(input.holdout, options, traceRef);
  return {
    format: 'kvroute-tune',
    version: 1,
    kvroute_version: kvrouteVersion(),
    command: options.command,
    started_at: input.startedAt.toISOString(),
    policy: options.policy,
    objective: { name: options.objective, unit: OBJECTIVES[options.objective].unit, aggregate: options.aggregate },
    search: {
      method: describeSearch(options, input.rounds),
      seed: options.seed,
      samples: options.samples,
      refine: input.rounds[0]!.method === 'grid' ? 0 : options.refine,
      rounds: input.rounds.map((round, i) => ({ round: i + 1, method: round.method, points: round.points.length })),
      simulations: input.simulations,
    },
    params: options.params.map((range, i) => ({ ...range, default: input.defaults.point[i]! })),
    setup: {
      instances: options.instances,
      preset: options.preset,
      engine_state: options.engineState,
      ...fleetRecord(options.fleet),
      ...(options.flow === undefined ? {} : { flow: options.flow.fields }),
    },
    traces: options.traces.map(traceRef),
    points: points.map((p) => ({
      id: p.id,
      round: p.round,
      params: paramsOf(p.point),
      per_trace: p.perTrace,
      objective: p.objective,
    })),
    defaults,
    best: { id: best.id, params: paramsOf(best.point), spec, per_trace: best.perTrace, objective: best.objective },
    margins: {
      vs_defaults: margin(defaults.objective, best.objective),
      vs_runner_up: runnerUp === undefined ? null : { id: runnerUp.id, ...margin(runnerUp.objective, best.objective) },
      within: WITHIN,
      intervals: intervals(options, points, best.objective),
    },
    holdout,
    wall_s: input.wallSeconds,
  };
}

function holdoutResult(
  values: { best: number[]; defaults: number[] },
  options: TuneOptions,
  traceRef: (path: string) => TraceRef,
): NonNullable<TuneResult['holdout']> {
  const best = aggregate(options.aggregate, values.best);
  const defaults = aggregate(options.aggregate, values.defaults);
  return {
    traces: options.holdout.map(traceRef),
    best: { per_trace: values.best, objective: best },
    defaults: { per_trace: values.defaults, objective: defaults },
    vs_defaults: margin(defaults, best),
  };
}

function margin(other: number, best: number): Margin {
  const delta = other - best;
  return { objective: other, delta, relative: other === 0 ? null : delta / other };
}

/** Per parameter, its smallest and largest value among the points within WITHIN of `best`. */
function intervals(options: TuneOptions, points: readonly Evaluated[], best: number) {
  const near = points.filter((p) => p.objective <= best + WITHIN * Math.abs(best));
  return options.params.map((range, i) => {
    const values = near.map((p) => p.point[i]!);
    return { name: range.name, lo: Math.min(...values), hi: Math.max(...values), points: near.length };
  });
}

/** The search in one sentence: "grid of all 6 points" or "maximin Latin hypercube of 24 points, then 8 …". */
function describeSearch(options: TuneOptions, rounds: readonly Round[]): string {
  const [explore, refine] = rounds;
  if (explore!.method === 'grid')
    return `grid of every combination (${explore!.points.length} points): exhaustive, no refining round`;
  const points = (n: number): string => counted(n, 'point');
  const first = `maximin Latin hypercube of ${points(explore!.points.length)} (${options.samples - options.refine} levels per parameter, seed ${options.seed})`;
  if (refine === undefined) return first;
  return `${first}, then a maximin Latin hypercube of ${points(refine.points.length)} within one round-1 level spacing of round 1's best`;
}
