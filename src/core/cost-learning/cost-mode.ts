/**
 * How min_ttft prices each instance (docs/policies.md "Learned costs"), in the simulator
 * (`sim run --costs`, `sweep --costs`) and the proxy (`serve --costs`): `learned`, a steering
 * CostLearner pushes each instance's learned costs into the router; `fixed`, the preset's
 * token-equivalents for every instance (reproducible whatever the learner does). Its own file
 * so that options and `--help` name the modes without loading the learner; imports nothing.
 */
export type CostMode = 'learned' | 'fixed';
export const COST_MODES: readonly CostMode[] = ['learned', 'fixed'];
