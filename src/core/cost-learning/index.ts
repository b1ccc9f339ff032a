/**
 * The learned per-instance costs (docs/policies.md "Learned costs"): the CostLearner an embedder
 * attaches to a Router, the per-instance estimator and its robust RLS. Imports nothing outside
 * src/core.
 */
export { CostLearner, type CostLearnerOptions } from './cost-learner.js';
export {
  DEFAULT_COST_PRIOR,
  DEFAULT_ESTIMATOR_OPTIONS,
  InstanceCostEstimator,
  predictTtftSeconds,
  type CostCoefficients,
  type CostEstimatorOptions,
  type DecodeObservation,
  type InstanceCostEstimate,
  type TtftObservation,
} from './instance-cost-estimator.js';
