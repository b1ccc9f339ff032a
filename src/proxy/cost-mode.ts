/**
 * `serve --costs` (docs/proxy.md "Learned costs"): learned prices steer min_ttft, or the preset's
 * fixed ones do. Apart from proxy-costs.ts so that the options and `serve --help` name the modes
 * without loading the learner; imports nothing.
 */
export type CostMode = 'learned' | 'fixed';

export const COST_MODES: readonly CostMode[] = ['learned', 'fixed'];
