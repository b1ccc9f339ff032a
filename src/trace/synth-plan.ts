/**
 * The up-front part of a synthetic trace: who the sessions are, before any request exists.
 *
 * Why: requests must come out in global arrival order while being generated lazily. What has
 * to be known globally to do that is small (a start time per root session, a class and turn
 * count per session, which sessions fork from which), so it is fixed here in typed arrays;
 * everything per turn (lengths, timing, hash ids) is drawn later from each session's own stream.
 *
 * Algorithm:
 * - `round(sessions × scale)` sessions, of which `round(n × subagentShare)` are sub-agents
 *   (forks) and the rest roots. Plan index: roots 0..roots-1 in start order, then forks.
 * - Root start times: independent uniforms over [0, duration), sorted (a Poisson process
 *   conditioned on its count). With `arrivals` poisson or on-off, those uniforms are still
 *   drawn (so every later draw, hence every session, is the same) and then replaced by the
 *   process's own start times (synth-arrivals.ts).
 * - Class: exactly round(n × longShare) sessions (roots and forks alike, at random plan
 *   indices) are long, the rest short. Turns: the class's truncated log-normal quantile of
 *   stratified uniforms. Fixing the long count and stratifying their lengths keeps the heavy
 *   tail from swinging the request count (and the percentiles) from seed to seed.
 * - System prefix: exactly round(share × count) roots of each class (see assignSystemPrefix);
 *   a fork inherits its parent's.
 * - Each fork picks a parent root uniformly among those with spare fork slots
 *   (maxForksPerParent) and a fork turn uniform in 1..min(parent turns, forkTurnMax).
 *   `forkOffsets`/`forkOrder` list each root's forks sorted by fork turn (CSR layout).
 *
 * Complexity: O(n log n) time (the sort), ~26 bytes per session.
 */
import {
  SynthRandom,
  mixSeed,
  normalCdf,
  normalQuantile,
  shuffledIndices,
  stratifiedUniforms,
} from './synth-random.js';
import type { LogNormalSpec, SynthModel } from './synth-model.js';
import { scaledSessionCount, type SynthOptions } from './synth-options.js';
import { drawOpenLoopStarts } from './synth-arrivals.js';

/** Stream tags for mixSeed: each use of the seed gets its own independent stream. */
export const PLAN_STREAM = 1;
export const SESSION_STREAM = 2;

export interface SynthPlan {
  roots: number;
  forks: number;
  /** Start time of root r (seconds), non-decreasing in r. Length `roots`. */
  start: Float64Array;
  /** Turns of plan index i (roots first, then forks). Length `roots + forks`. */
  turns: Uint32Array;
  /** 1 when plan index i is a long session (SynthModel.long). */
  long: Uint8Array;
  /** 1 when root r's prompts start with the shared system prefix. Length `roots`. */
  systemPrefix: Uint8Array;
  /** Parent root of fork f (plan index `roots + f`). */
  forkParent: Uint32Array;
  /** The parent turn whose prompt fork f inherits (1-based). */
  forkTurn: Uint32Array;
  /** Forks of root r: forkOrder[forkOffsets[r] .. forkOffsets[r + 1]), by fork turn. */
  forkOffsets: Uint32Array;
  forkOrder: Uint32Array;
}

/** ceil(X) for X log-normal truncated to (min - 1, max], at quantile u in (0, 1). */
export function truncatedTurns(spec: LogNormalSpec, u: number): number {
  const mu = Math.log(spec.median);
  const low = spec.min > 1 ? normalCdf((Math.log(spec.min - 1) - mu) / spec.sigma) : 0;
  const high = normalCdf((Math.log(spec.max) - mu) / spec.sigma);
  const p = Math.min(1 - 1e-12, Math.max(1e-12, low + u * (high - low)));
  const turns = Math.ceil(Math.exp(mu + spec.sigma * normalQuantile(p)));
  return Math.min(spec.max, Math.max(spec.min, turns)); // guards the CDF approximation's error
}

/**
 * Class and turns for every plan index: exactly round(longShare × count) long sessions at
 * random plan indices, each class's turns from its own stratified uniforms.
 */
function drawSessions(rng: SynthRandom, count: number, model: SynthModel, plan: SynthPlan): void {
  const longCount = Math.round(model.longShare * count);
  const order = shuffledIndices(rng, count);
  const longU = stratifiedUniforms(rng, longCount);
  const shortU = stratifiedUniforms(rng, count - longCount);
  for (let k = 0; k < count; k += 1) {
    const i = order[k]!;
    const long = k < longCount;
    plan.long[i] = long ? 1 : 0;
    plan.turns[i] = long
      ? truncatedTurns(model.long.turns, longU[k]!)
      : truncatedTurns(model.short.turns, shortU[k - longCount]!);
  }
}

/**
 * Exactly round(share × n) of the n short roots and round(share × m) of the m long roots use
 * the system prefix, picked uniformly (partial Fisher–Yates): per class, so a long session
 * (which holds ~8× a short one's requests) does not swing the prefix's request share.
 */
function assignSystemPrefix(rng: SynthRandom, plan: SynthPlan, share: number): void {
  for (const long of [0, 1]) {
    const members: number[] = [];
    for (let r = 0; r < plan.roots; r += 1) if (plan.long[r] === long) members.push(r);
    const picks = Math.round(share * members.length);
    for (let k = 0; k < picks; k += 1) {
      const j = rng.int(k, members.length - 1);
      const chosen = members[j]!;
      members[j] = members[k]!;
      members[k] = chosen;
      plan.systemPrefix[chosen] = 1;
    }
  }
}

function assignForks(rng: SynthRandom, plan: SynthPlan, model: SynthModel): void {
  const slots = new Uint8Array(plan.roots);
  for (let f = 0; f < plan.forks; f += 1) {
    // Bounded retries: with forks <= 0.9 × sessions most roots have spare slots; if every
    // try lands on a full parent the last one is used anyway (the cap is a soft target).
    let parent = rng.int(0, plan.roots - 1);
    for (let attempt = 0; attempt < 32 && slots[parent]! >= model.maxForksPerParent; attempt += 1) {
      parent = rng.int(0, plan.roots - 1);
    }
    slots[parent] = Math.min(255, slots[parent]! + 1);
    plan.forkParent[f] = parent;
    plan.forkTurn[f] = rng.int(1, Math.min(plan.turns[parent]!, model.forkTurnMax));
  }
  // CSR index by parent, then sort each parent's (few) forks by turn.
  for (let f = 0; f < plan.forks; f += 1) plan.forkOffsets[plan.forkParent[f]! + 1]! += 1;
  for (let r = 0; r < plan.roots; r += 1) plan.forkOffsets[r + 1]! += plan.forkOffsets[r]!;
  const fill = plan.forkOffsets.slice(0, plan.roots);
  for (let f = 0; f < plan.forks; f += 1) plan.forkOrder[fill[plan.forkParent[f]!]!++] = f;
  for (let r = 0; r < plan.roots; r += 1) {
    const begin = plan.forkOffsets[r]!;
    const end = plan.forkOffsets[r + 1]!;
    for (let i = begin + 1; i < end; i += 1) {
      const f = plan.forkOrder[i]!;
      let j = i;
      for (; j > begin && plan.forkTurn[plan.forkOrder[j - 1]!]! > plan.forkTurn[f]!; j -= 1) {
        plan.forkOrder[j] = plan.forkOrder[j - 1]!;
      }
      plan.forkOrder[j] = f;
    }
  }
}

export function buildPlan(options: Required<SynthOptions>, model: SynthModel): SynthPlan {
  const total = scaledSessionCount(options);
  const forks = Math.min(total - 1, Math.round(total * options.subagentShare));
  const roots = total - forks;
  const rng = new SynthRandom(mixSeed(options.seed, PLAN_STREAM, 0));
  const plan: SynthPlan = {
    roots,
    forks,
    start: new Float64Array(roots),
    turns: new Uint32Array(total),
    long: new Uint8Array(total),
    systemPrefix: new Uint8Array(roots),
    forkParent: new Uint32Array(forks),
    forkTurn: new Uint32Array(forks),
    forkOffsets: new Uint32Array(roots + 1),
    forkOrder: new Uint32Array(forks),
  };
  for (let r = 0; r < roots; r += 1) plan.start[r] = rng.next() * options.duration;
  plan.start.sort();
  if (options.arrivals !== 'uniform') drawOpenLoopStarts(plan.start, { ...options, process: options.arrivals });
  drawSessions(rng, total, model, plan);
  assignSystemPrefix(rng, plan, options.systemPrefixShare);
  assignForks(rng, plan, model);
  return plan;
}
