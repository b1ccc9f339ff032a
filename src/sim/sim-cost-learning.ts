/**
 * The simulator's cost learners (docs/policies.md "Learned costs in the simulator"): a
 * CostLearner beside each router replica, told what that replica is told (routed, first token,
 * completed) at the same virtual instants, so `sim run` can show what the router would learn of
 * each engine next to the engine's true coefficients.
 *
 * Invariants: the learners only read the routers (router.decision, after route()); they never
 * call anything that changes a decision, so a run's records are the same with or without them
 * (test/sim-learned-costs.test.ts holds them so). Their prior is the unscaled named preset, as
 * the router is never told --prefill-cost or --fleet; the truth is each engine's own preset,
 * after that scaling. An offloaded request is no observation (CostLearner ignores it). With
 * replicas, each learns from its own dispatches only, as each proxy replica would; the report
 * is replica 0's. Times are virtual seconds, handed to the learners as ms.
 *
 * With `costs: 'learned'` (the default) the learners also steer: each pushes its estimates into
 * its router (CostLearner `steer`), so min_ttft prices every instance in predicted seconds and
 * the records change; with `costs: 'fixed'` they only watch, and the invariant above holds.
 */
import { CostLearner } from '../core/cost-learning/cost-learner.js';
import {
  DEFAULT_COST_PRIOR,
  type CostCoefficients,
  type InstanceCostEstimate,
} from '../core/cost-learning/instance-cost-estimator.js';
import { invalidValue } from '../core/errors.js';
import type { Router } from '../core/router.js';
import { COST_MODES, type CostMode } from '../core/cost-learning/cost-mode.js';
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS, type EnginePreset } from './engine-preset.js';

/** An engine's true coefficients, as the estimator models them; interference has no preset value. */
export type TrueCostCoefficients = Omit<CostCoefficients, 'interference'>;

/** One instance's learned and true costs. */
export interface InstanceLearnedCost {
  instance: number;
  learned: InstanceCostEstimate;
  truth: TrueCostCoefficients;
}

/** The coefficients of `preset` in the estimator's units (seconds). */
export function presetCostCoefficients(preset: EnginePreset): TrueCostCoefficients {
  return {
    prefillSecondsPerToken: preset.prefillMsPerToken / 1000,
    prefillOverheadSeconds: preset.stepOverheadMs / 1000,
    decodeStepSeconds: preset.decodeBaseMs / 1000,
    decodeSecondsPerSequence: preset.decodeMsPerSeq / 1000,
  };
}

/** Refuses a cost mode that is not one, or `learned` without learners, naming the option. */
export function checkCostMode(options: { learnCosts?: boolean; costs?: CostMode }): void {
  if (options.costs !== undefined && !COST_MODES.includes(options.costs))
    throw invalidValue('costs', `one of ${COST_MODES.join(', ')}`, options.costs);
  if (options.costs === 'learned' && options.learnCosts === false)
    throw invalidValue('costs', "'fixed' when learnCosts is false (learned costs need the learners)", options.costs);
}

export class SimCostLearning {
  private readonly learners: CostLearner[];

  /** The learners of a run over `routers` and engines of `presets`; undefined when `learnCosts` is false. */
  static forRun(
    options: { preset?: string; learnCosts?: boolean; costs?: CostMode },
    routers: readonly Router[],
    presets: readonly EnginePreset[],
    instanceIds: readonly string[],
  ): SimCostLearning | undefined {
    if (options.learnCosts === false) return undefined;
    const prior = ENGINE_PRESETS[options.preset ?? DEFAULT_ENGINE_PRESET]!;
    return new SimCostLearning(routers, prior, presets, instanceIds, (options.costs ?? 'learned') === 'learned');
  }

  /**
   * `prior`: the named preset before any scaling; `truths`: each engine's scaled preset, in
   * instance order; `instanceIds`: the routers' ids, in the same order.
   */
  constructor(
    routers: readonly Router[],
    prior: EnginePreset,
    private readonly truths: readonly EnginePreset[],
    private readonly instanceIds: readonly string[],
    steer = false,
  ) {
    const coefficients = { ...presetCostCoefficients(prior), interference: DEFAULT_COST_PRIOR.interference };
    this.learners = routers.map((router) => new CostLearner(router, { prior: coefficients, now: () => 0, steer }));
  }

  /** Right after `replica`'s route() returned `ticket`, at virtual second `now`. */
  routed(replica: number, ticket: number, now: number): void {
    this.learners[replica]!.routed(ticket, now * 1000);
  }

  firstToken(replica: number, ticket: number, now: number): void {
    this.learners[replica]!.firstToken(ticket, now * 1000);
  }

  completed(replica: number, ticket: number, outputTokens: number, now: number): void {
    this.learners[replica]!.completed(ticket, { outputTokens, atMs: now * 1000 });
  }

  /** Every instance's learned costs (replica 0's learner) beside its engine's true ones. */
  costs(): InstanceLearnedCost[] {
    const learner = this.learners[0]!;
    return this.instanceIds.map((id, instance) => ({
      instance,
      learned: learner.estimate(id),
      truth: presetCostCoefficients(this.truths[instance]!),
    }));
  }
}
