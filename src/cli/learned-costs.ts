/**
 * `sim run`'s learned costs (docs/policies.md "Learned costs in the simulator"): per instance,
 * what the router's CostLearner learned of its engine beside the engine's true coefficients
 * (src/sim/sim-cost-learning.ts). `learned_costs` in --json (documented in docs/records.md
 * "sim run --json"), a short "learned costs" table in the text output. An instance with no
 * observation shows its prior, and says so by its 0 observations. Interference has no true
 * value: the engine model has no such coefficient, only the steps it shares.
 */
import { formatFleet, groupOfInstance, isUniformFleet, type FleetGroup } from '../sim/fleet-spec.js';
import type { InstanceLearnedCost } from '../sim/sim-cost-learning.js';

export interface LearnedCostFields {
  instance: number;
  /** The instance's fleet group, `4:prefill=0.5`; only on a mixed fleet. */
  group?: string;
  ttft_observations: number;
  decode_observations: number;
  learned: {
    prefill_s_per_token: number;
    prefill_tokens_per_s: number;
    prefill_overhead_s: number;
    interference: number;
    decode_step_s: number;
    decode_s_per_sequence: number;
  };
  truth: {
    prefill_s_per_token: number;
    prefill_tokens_per_s: number;
    prefill_overhead_s: number;
    decode_step_s: number;
    decode_s_per_sequence: number;
  };
  /** learned ÷ true prefill seconds per token − 1 (0.05: learned 5% slower than the truth). */
  prefill_relative_error: number;
}

/** The `learned_costs` entries, in instance order. */
export function learnedCostFields(
  costs: readonly InstanceLearnedCost[],
  fleet: readonly FleetGroup[] | undefined,
): LearnedCostFields[] {
  const mixed = fleet !== undefined && !isUniformFleet(fleet);
  const groupOf = mixed ? groupOfInstance(fleet) : [];
  return costs.map(({ instance, learned, truth }) => ({
    instance,
    ...(mixed ? { group: formatFleet([fleet[groupOf[instance]!]!]) } : {}),
    ttft_observations: learned.ttftObservations,
    decode_observations: learned.decodeObservations,
    learned: {
      prefill_s_per_token: learned.prefillSecondsPerToken,
      prefill_tokens_per_s: learned.prefillTokensPerSecond,
      prefill_overhead_s: learned.prefillOverheadSeconds,
      interference: learned.interference,
      decode_step_s: learned.decodeStepSeconds,
      decode_s_per_sequence: learned.decodeSecondsPerSequence,
    },
    truth: {
      prefill_s_per_token: truth.prefillSecondsPerToken,
      prefill_tokens_per_s: 1 / truth.prefillSecondsPerToken,
      prefill_overhead_s: truth.prefillOverheadSeconds,
      decode_step_s: truth.decodeStepSeconds,
      decode_s_per_sequence: truth.decodeSecondsPerSequence,
    },
    prefill_relative_error: learned.prefillSecondsPerToken / truth.prefillSecondsPerToken - 1,
  }));
}

/** The text table: `  instance 4 (4:prefill=0.5)  learned 44.1 k tok/s  true 44.3 k tok/s  −0.4%  512 obs`. */
export function renderLearnedCosts(fields: readonly LearnedCostFields[]): string[] {
  const kTokens = (perSecond: number) => `${(perSecond / 1000).toFixed(1)} k tok/s`;
  const rows = fields.map((f) => [
    `instance ${f.instance}${f.group === undefined ? '' : ` (${f.group})`}`,
    `learned ${kTokens(f.learned.prefill_tokens_per_s)}`,
    `true ${kTokens(f.truth.prefill_tokens_per_s)}`,
    `${f.prefill_relative_error >= 0 ? '+' : '−'}${Math.abs(f.prefill_relative_error * 100).toFixed(1)}%`,
    `${f.ttft_observations} obs`,
  ]);
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]!.length))) ?? [];
  return rows.map(
    (row) =>
      `  ${row.map((cell, column) => (column >= 3 ? cell.padStart(widths[column]!) : cell.padEnd(widths[column]!))).join('  ')}`,
  );
}
