/**
 * `sim run --replicas R --replica-assign random|session --sync none|events|load|all --sync-delay MS`
 * (docs/scale-out.md): the flags checked, as SimulationOptions and as the fields a run's header
 * and --json output carry. With one replica (the default) both are empty, so a run without the
 * flags is unchanged byte for byte; `--sync none` (the default) adds nothing either.
 */
import { REPLICA_ASSIGNS, type ReplicaAssign } from '../sim/replica-assign.js';
import { REPLICA_SYNCS, type ReplicaSyncMode } from '../sim/simulation-options.js';
import type { SimulationOptions } from '../sim/simulator.js';
import { choiceFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { SIM_RUN_DEFAULTS } from './defaults/sim-defaults.js';

export interface ReplicaFlags {
  options: Pick<
    SimulationOptions,
    'replicas' | 'replicaAssign' | 'replicaSeed' | 'cacheState' | 'syncLoad' | 'syncDelayMs'
  >;
  /** `{ replicas, replica_assign }` when R > 1, with `sync` and `sync_delay_ms` when synced; else empty. */
  fields: { replicas?: number; replica_assign?: ReplicaAssign; sync?: ReplicaSyncMode; sync_delay_ms?: number };
}

/** `--replicas`: an integer from 1 to 64 (MAX_REPLICAS); `--replica-assign`: one of REPLICA_ASSIGNS. */
export function replicaFlags(values: OptionValues, seed: number): ReplicaFlags {
  const { maxReplicas } = SIM_RUN_DEFAULTS;
  const raw = stringFlag(values, 'replicas');
  const replicas = raw === undefined ? SIM_RUN_DEFAULTS.replicas : Number(raw);
  if (raw !== undefined && !(/^\d+$/.test(raw) && replicas >= 1 && replicas <= maxReplicas))
    throw new UsageError(`--replicas must be an integer from 1 to ${maxReplicas}, got ${raw}`);
  const assign = choiceFlag(values, 'replica-assign', REPLICA_ASSIGNS) ?? SIM_RUN_DEFAULTS.replicaAssign;
  const sync = choiceFlag(values, 'sync', REPLICA_SYNCS) ?? SIM_RUN_DEFAULTS.sync;
  const rawDelay = stringFlag(values, 'sync-delay');
  if (rawDelay !== undefined && sync === 'none')
    throw new UsageError('--sync-delay needs --sync events, load or all (there is nothing to delay)');
  const delayMs = rawDelay === undefined ? SIM_RUN_DEFAULTS.syncDelayMs : Number(rawDelay);
  if (rawDelay !== undefined && !(rawDelay.trim() !== '' && Number.isFinite(delayMs) && delayMs >= 0))
    throw new UsageError(`--sync-delay must be a number of milliseconds >= 0, got ${rawDelay}`);
  if (sync !== 'none' && replicas === 1)
    throw new UsageError(`--sync ${sync} needs --replicas above 1 (one router has no peers to sync with)`);
  if ((sync === 'events' || sync === 'all') && stringFlag(values, 'cache-state') !== undefined)
    throw new UsageError(`--sync ${sync} sets the cache state itself (KV events, delayed); drop --cache-state`);
  if (replicas === 1) return { options: {}, fields: {} };
  const options: ReplicaFlags['options'] = { replicas, replicaAssign: assign, replicaSeed: seed };
  const fields: ReplicaFlags['fields'] = { replicas, replica_assign: assign };
  if (sync === 'none') return { options, fields };
  if (sync === 'events' || sync === 'all') options.cacheState = 'events';
  if (sync === 'load' || sync === 'all') options.syncLoad = true;
  options.syncDelayMs = delayMs;
  return { options, fields: { ...fields, sync, sync_delay_ms: delayMs } };
}
