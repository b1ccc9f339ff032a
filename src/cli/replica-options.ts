/**
 * `sim run --replicas R --replica-assign random|session` (docs/scale-out.md): the flags checked,
 * as SimulationOptions and as the fields a run's header and --json output carry. With one
 * replica (the default) both are empty, so a run without the flags is unchanged byte for byte.
 */
import { REPLICA_ASSIGNS, type ReplicaAssign } from '../sim/replica-assign.js';
import type { SimulationOptions } from '../sim/simulator.js';
import { choiceFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { SIM_RUN_DEFAULTS } from './defaults/sim-defaults.js';

export interface ReplicaFlags {
  options: Pick<SimulationOptions, 'replicas' | 'replicaAssign' | 'replicaSeed'>;
  /** `{ replicas, replica_assign }` when R > 1, else empty. */
  fields: { replicas?: number; replica_assign?: ReplicaAssign };
}

/** `--replicas`: an integer from 1 to 64 (MAX_REPLICAS); `--replica-assign`: one of REPLICA_ASSIGNS. */
export function replicaFlags(values: OptionValues, seed: number): ReplicaFlags {
  const { maxReplicas } = SIM_RUN_DEFAULTS;
  const raw = stringFlag(values, 'replicas');
  const replicas = raw === undefined ? SIM_RUN_DEFAULTS.replicas : Number(raw);
  if (raw !== undefined && !(/^\d+$/.test(raw) && replicas >= 1 && replicas <= maxReplicas))
    throw new UsageError(`--replicas must be an integer from 1 to ${maxReplicas}, got ${raw}`);
  const assign = choiceFlag(values, 'replica-assign', REPLICA_ASSIGNS) ?? SIM_RUN_DEFAULTS.replicaAssign;
  if (replicas === 1) return { options: {}, fields: {} };
  return {
    options: { replicas, replicaAssign: assign, replicaSeed: seed },
    fields: { replicas, replica_assign: assign },
  };
}
