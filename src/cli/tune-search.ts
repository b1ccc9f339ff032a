/**
 * The points `kvroute tune` evaluates (docs/tune.md): a plain, seeded search, the same points
 * for the same flags on every machine.
 *
 * Round 1 (explore), `n` points:
 * - `grid` when every parameter has finitely many values (an integer range, or lo = hi) and
 *   their product is at most `n`: every combination, so the search is exhaustive.
 * - otherwise a `maximin Latin hypercube`: each parameter takes `n` evenly spaced levels from lo
 *   to hi, both ends included (rounded for integers), paired across parameters by seeded random
 *   permutations. Of DESIGNS such designs the one whose two closest points (in the unit cube)
 *   are farthest apart is kept (Morris and Mitchell's maximin criterion). With one parameter
 *   this is the even grid of `n` values.
 * Round 2 (refine), `r` points: a maximin Latin hypercube in the box around round 1's best point,
 * one round-1 level spacing either side of it per parameter (clipped to lo..hi). Its levels are
 * the midpoints of `m` equal strata of the box, `m` = `r` rounded up to even, so neither the best
 * point nor its round-1 neighbours come again; with `r` odd one level per parameter goes unused.
 *
 * Points equal after rounding are evaluated once. Randomness: mulberry32 (synth-random.ts),
 * one stream per round, seeded from --seed. Cost: DESIGNS × n² × parameters to choose a design,
 * nothing beside the simulations.
 */
import { mixSeed, SynthRandom } from '../trace/synth-random.js';
import type { ParamRange } from './tune-params.js';

/** A point: one value per searched parameter, in the order of the ranges. */
export type Point = number[];

/** Latin hypercube designs drawn per round; the maximin one is kept. */
const DESIGNS = 16;

/** Stream tags of mixSeed, one per round. */
const STREAM = { explore: 1, refine: 2 } as const;

export type RoundMethod = 'grid' | 'maximin-lhs';

export interface Round {
  method: RoundMethod;
  points: Point[];
}

export function pointKey(point: Point): string {
  return point.join(',');
}

/** Values a parameter can take when it has finitely many; Infinity when continuous. */
function valueCount(range: ParamRange): number {
  if (range.lo === range.hi) return 1;
  return range.integer ? range.hi - range.lo + 1 : Infinity;
}

/** True when the grid of every combination fits in `budget` points. */
export function gridFits(ranges: readonly ParamRange[], budget: number): boolean {
  return ranges.reduce((product, range) => product * valueCount(range), 1) <= budget;
}

/** Round 1: the grid when it fits in `n`, else `n` points of a maximin Latin hypercube. */
export function exploreRound(ranges: readonly ParamRange[], n: number, seed: number): Round {
  if (gridFits(ranges, n)) return { method: 'grid', points: grid(ranges) };
  const levels = ranges.map((range) => evenLevels(range.lo, range.hi, n, range.integer));
  return {
    method: 'maximin-lhs',
    points: maximinDesign(ranges, levels, n, new SynthRandom(mixSeed(seed, STREAM.explore, 0))),
  };
}

/**
 * Round 2: `r` points around `best` in the box of one round-1 spacing (`n` levels over lo..hi)
 * either side, none already in `seen`.
 */
export function refineRound(
  ranges: readonly ParamRange[],
  best: Point,
  n: number,
  r: number,
  seed: number,
  seen: ReadonlySet<string>,
): Round {
  const strata = r + (r % 2); // even: no stratum is centred on the best
  const levels = ranges.map((range, i) => {
    const spacing = (range.hi - range.lo) / Math.max(1, n - 1);
    const lo = Math.max(range.lo, best[i]! - spacing);
    const hi = Math.min(range.hi, best[i]! + spacing);
    return Array.from({ length: strata }, (_, k) => level(lo + ((k + 0.5) * (hi - lo)) / strata, range.integer));
  });
  const random = new SynthRandom(mixSeed(seed, STREAM.refine, 0));
  const points = maximinDesign(ranges, levels, r, random).filter((point) => !seen.has(pointKey(point)));
  return { method: 'maximin-lhs', points };
}

/** Every combination of every parameter's values, the first parameter varying slowest. */
function grid(ranges: readonly ParamRange[]): Point[] {
  let points: Point[] = [[]];
  for (const range of ranges) {
    const values = range.lo === range.hi ? [range.lo] : evenLevels(range.lo, range.hi, valueCount(range), true);
    points = points.flatMap((point) => values.map((value) => [...point, value]));
  }
  return points;
}

/** `n` values from lo to hi, both included, evenly spaced (the midpoint when n = 1). */
function evenLevels(lo: number, hi: number, n: number, integer: boolean): number[] {
  if (n === 1) return [level((lo + hi) / 2, integer)];
  return Array.from({ length: n }, (_, k) => level(lo + (k * (hi - lo)) / (n - 1), integer));
}

/** Rounded to an integer, or to 12 significant digits (so 0.1 × 3 reads 0.3). */
function level(value: number, integer: boolean): number {
  return integer ? Math.round(value) : Number(value.toPrecision(12));
}

/**
 * Of DESIGNS Latin hypercubes of `n` points over `levels` (each parameter's levels, at least `n`,
 * paired by random permutations; each level used at most once), the one with the largest
 * smallest distance between two points; equal points (after rounding) kept once, sorted by
 * value (first parameter first).
 */
function maximinDesign(ranges: readonly ParamRange[], levels: number[][], n: number, random: SynthRandom): Point[] {
  let best: Point[] = [];
  let bestSpread = -1;
  for (let d = 0; d < DESIGNS; d++) {
    const order = levels.map((values) => permutation(values.length, random));
    const design = Array.from({ length: n }, (_, k) => ranges.map((_range, i) => levels[i]![order[i]![k]!]!));
    const spread = minDistance(ranges, design);
    if (spread > bestSpread) {
      best = design;
      bestSpread = spread;
    }
  }
  const kept = new Map<string, Point>();
  for (const point of best) if (!kept.has(pointKey(point))) kept.set(pointKey(point), point);
  return [...kept.values()].sort(byValues);
}

function byValues(a: Point, b: Point): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}

/** 0..n-1 shuffled (Fisher–Yates). */
function permutation(n: number, random: SynthRandom): number[] {
  const order = Array.from({ length: n }, (_, k) => k);
  for (let k = n - 1; k > 0; k--) {
    const j = Math.floor(random.next() * (k + 1));
    [order[k], order[j]] = [order[j]!, order[k]!];
  }
  return order;
}

/** The smallest squared distance between two points of `design`, each parameter scaled to 0..1. */
function minDistance(ranges: readonly ParamRange[], design: readonly Point[]): number {
  const scaled = design.map((point) =>
    point.map((value, i) => {
      const { lo, hi } = ranges[i]!;
      return hi === lo ? 0 : (value - lo) / (hi - lo);
    }),
  );
  let min = Infinity;
  for (let a = 0; a < scaled.length; a++)
    for (let b = a + 1; b < scaled.length; b++) {
      let sum = 0;
      for (let i = 0; i < ranges.length; i++) sum += (scaled[a]![i]! - scaled[b]![i]!) ** 2;
      min = Math.min(min, sum);
    }
  return min;
}
