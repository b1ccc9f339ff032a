/**
 * How min_ttft prices each simulated instance (docs/policies.md "Learned costs"): `learned`
 * online per instance by the replica's CostLearner, or `fixed`, the preset's token-equivalents
 * for every instance (reproducible whatever the learner does). Its own file: the options, the
 * learners and the CLI all name it, and none of them imports another for it.
 */
export type CostMode = 'learned' | 'fixed';
export const COST_MODES: readonly CostMode[] = ['learned', 'fixed'];
