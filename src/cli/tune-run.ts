/**
 * `kvroute tune`: searches a policy's tunables in the simulator (docs/tune.md).
 *
 * The points come from tune-search.ts (a grid, or a maximin Latin hypercube then an optional
 * refining round around the best). Each point is simulated on every --trace, one Piscina task
 * per (point, trace) on sweep-worker.ts's `tunePoint` (each worker reads its trace itself, so
 * nothing trace-sized crosses threads), and its objective is the mean (or worst) over the
 * traces. The policy's defaults are evaluated beside round 1; the best point and the defaults
 * are then evaluated on the --holdout traces, which never take part in the choice. A run is a
 * pure function of its flags: simulations are deterministic and the search is seeded.
 *
 * Cost: (points + 1) × traces + 2 × holdout simulations, spread over `workers` threads.
 */
import { accessSync, constants } from 'node:fs';
import { availableParallelism } from 'node:os';
import type { Piscina } from 'piscina';

import { resolvePolicy } from '../core/policy-spec.js';
import type { PolicySpec } from '../core/types.js';
import { destroyWorkerPool, newWorkerPool } from '../core/worker-pool.js';
import type { TraceReadStats } from '../trace/read-trace.js';
import { ioError } from '../trace/trace-errors.js';
import { SIM_WORKER_URL, type CellFailure } from './sweep-cell.js';
import { aggregate, objectiveValue } from './tune-objectives.js';
import type { TunePointResult, TunePointTask } from './tune-point.js';
import { tuneResult, type Evaluated, type TuneResult } from './tune-result.js';
import type { TuneCounter, TuneOptions } from './tune-options.js';
import { exploreRound, gridFits, pointKey, refineRound, type Point, type Round } from './tune-search.js';

export interface TuneOutcome {
  result: TuneResult;
  /** The reader's stats of each trace's first read (--trace, then --holdout), for its warnings. */
  readStats: Array<{ trace: string; stats: TraceReadStats }>;
}

/** A failed simulation rethrown here with its code, so a trace read error still exits 1. */
class PointError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

export async function runTune(options: TuneOptions): Promise<TuneOutcome> {
  const started = performance.now();
  const startedAt = new Date();
  for (const trace of [...options.traces, ...options.holdout]) {
    try {
      accessSync(trace, constants.R_OK);
    } catch (error) {
      throw ioError(trace, error);
    }
  }
  const defaults = policyDefaults(options);
  const explore = exploreRound(options.params, exploreBudget(options), options.seed);
  const traces = options.traces.length;
  const evaluator = new Evaluator(
    options,
    Math.max((explore.points.length + 1) * traces, options.refine * traces, 2 * options.holdout.length),
  );
  try {
    evaluator.plan(explore.points.length + 1, traces);
    const [points, defaultValues] = await Promise.all([
      evaluator.points(explore.points, 1, 1),
      evaluator.values(defaults, options.traces, 'defaults'),
    ]);
    const rounds = [explore, ...(await refine(evaluator, options, explore, points))];
    const best = bestOf(points);
    let holdout: { best: number[]; defaults: number[] } | undefined;
    if (options.holdout.length > 0) {
      evaluator.plan(2, options.holdout.length);
      const [bestValues, defaultsValues] = await Promise.all([
        evaluator.values(best.point, options.holdout, best.id),
        evaluator.values(defaults, options.holdout, 'defaults'),
      ]);
      holdout = { best: bestValues, defaults: defaultsValues };
    }
    const result = tuneResult({
      options,
      startedAt,
      rounds,
      points,
      defaults: { point: defaults, perTrace: defaultValues },
      holdout,
      fingerprints: evaluator.fingerprints,
      simulations: evaluator.simulations,
      wallSeconds: (performance.now() - started) / 1000,
    });
    return { result, readStats: evaluator.readStats() };
  } finally {
    await evaluator.close();
  }
}

/** Round 2 around round 1's best, its points appended to `points`; none after a grid or with --refine 0. */
async function refine(
  evaluator: Evaluator,
  options: TuneOptions,
  explore: Round,
  points: Evaluated[],
): Promise<Round[]> {
  if (explore.method === 'grid' || options.refine === 0 || points.length === 0) return [];
  const seen = new Set(points.map((p) => pointKey(p.point)));
  const best = bestOf(points).point;
  const round = refineRound(options.params, best, exploreBudget(options), options.refine, options.seed, seen);
  evaluator.plan(round.points.length, options.traces.length);
  points.push(...(await evaluator.points(round.points, 2, points.length + 1)));
  return [round];
}

/** Round 1's budget: every sample when the grid fits in them, else all but the refining round's. */
export function exploreBudget(options: Pick<TuneOptions, 'params' | 'samples' | 'refine'>): number {
  return gridFits(options.params, options.samples) ? options.samples : options.samples - options.refine;
}

/** The policy's own values of the searched parameters. */
function policyDefaults(options: TuneOptions): Point {
  const resolved = resolvePolicy(options.policy);
  return options.params.map((range) => resolved[range.name]);
}

/** The lowest objective; ties go to the lower id. */
export function bestOf(points: readonly Evaluated[]): Evaluated {
  return points.reduce((best, p) => (p.objective < best.objective ? p : best));
}

/** Runs simulations on the pool, once per (setting, trace): a repeated one is answered from memory. */
class Evaluator {
  private readonly pool: Piscina;
  private readonly memo = new Map<string, Promise<number>>();
  private readonly stats = new Map<string, TraceReadStats>();
  readonly fingerprints = new Map<string, { fingerprint: string; requests: number }>();
  private readonly counter: TuneCounter;

  /** Simulations run so far. */
  get simulations(): number {
    return this.counter.done;
  }

  /** `most`: the most simulations that can be waiting at once, so no thread starts idle. */
  constructor(
    private readonly options: TuneOptions,
    most: number,
  ) {
    const threads = Math.max(1, Math.min(most, options.workers ?? availableParallelism()));
    this.pool = newWorkerPool({ filename: SIM_WORKER_URL, minThreads: threads, maxThreads: threads });
    this.counter = options.counter ?? { done: 0, planned: 0 };
  }

  plan(points: number, traces: number): void {
    this.counter.planned += points * traces;
  }

  /** Evaluates `points` on every --trace; ids from `firstId` on. */
  async points(points: readonly Point[], round: 1 | 2, firstId: number): Promise<Evaluated[]> {
    return Promise.all(
      points.map(async (point, i) => {
        const id = firstId + i;
        const perTrace = await this.values(point, this.options.traces, id);
        return { id, round, point, perTrace, objective: aggregate(this.options.aggregate, perTrace) };
      }),
    );
  }

  /** The objective's metric of `point` on each of `traces`. */
  values(point: Point, traces: readonly string[], label: number | 'defaults'): Promise<number[]> {
    return Promise.all(traces.map((trace) => this.value(point, trace, label)));
  }

  private value(point: Point, trace: string, label: number | 'defaults'): Promise<number> {
    const key = `${trace}\n${pointKey(point)}`;
    let value = this.memo.get(key);
    if (value === undefined) {
      value = this.simulate(point, trace, label);
      this.memo.set(key, value);
    } else this.counter.planned--; // answered from memory: no simulation after all
    return value;
  }

  private async simulate(point: Point, trace: string, label: number | 'defaults'): Promise<number> {
    const spec: PolicySpec = { name: this.options.policy };
    this.options.params.forEach((range, i) => (spec[range.name] = point[i]!));
    const task: TunePointTask = {
      trace,
      reader: this.options.reader,
      policy: spec,
      engineState: this.options.engineState,
      instances: this.options.instances,
      ...(this.options.fleet === undefined ? {} : { fleet: this.options.fleet }),
      preset: this.options.preset,
      ...(this.options.flow === undefined ? {} : { flow: this.options.flow.options }),
    };
    const result = (await this.pool.run(task, { name: 'tunePoint' })) as TunePointResult | CellFailure;
    if ('failed' in result) throw new PointError(result.message, result.code);
    this.check(trace, result);
    const value = objectiveValue(this.options.objective, result.metrics);
    this.counter.done++;
    this.options.onEvaluation?.(this.counter, { point: label, trace, value, wall_s: result.wall_s });
    return value;
  }

  /** Every read of a trace must see the same requests; the first read's stats are kept. */
  private check(trace: string, result: TunePointResult): void {
    const known = this.fingerprints.get(trace);
    if (known === undefined) {
      this.fingerprints.set(trace, { fingerprint: result.fingerprint, requests: result.metrics.requests });
      this.stats.set(trace, result.readStats);
    } else if (known.fingerprint !== result.fingerprint)
      throw new Error(`${trace} changed during the search: ${known.fingerprint}, then ${result.fingerprint}`);
  }

  /** In the order of --trace, then --holdout. */
  readStats(): Array<{ trace: string; stats: TraceReadStats }> {
    const traces = [...new Set([...this.options.traces, ...this.options.holdout])];
    return traces.flatMap((trace) => {
      const stats = this.stats.get(trace);
      return stats === undefined ? [] : [{ trace, stats }];
    });
  }

  close(): Promise<void> {
    return destroyWorkerPool(this.pool);
  }
}

export type { EvaluationNote, TuneCounter, TuneOptions } from './tune-options.js';
