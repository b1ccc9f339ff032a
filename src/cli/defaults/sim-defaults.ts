/**
 * The defaults of `kvroute sim run and sim serve`, in a file of their own: the command declaration
 * (../sim-command.ts) prints them in --help and the verb applies them, and neither imports
 * the other for them (no command <-> verb import cycle). Pure constants: loads no verb code.
 */
import { DEFAULT_POLICY } from '../../core/policy-spec.js';
import { DEFAULT_ENGINE_PRESET } from '../../sim/engine-preset.js';

export const SIM_RUN_DEFAULTS = {
  policy: DEFAULT_POLICY,
  instances: 8,
  engineState: 'shadow',
  preset: DEFAULT_ENGINE_PRESET,
  seed: 1,
  replicas: 1,
  replicaAssign: 'random',
  cacheState: 'own',
  sync: 'none',
  syncDelayMs: 5,
  costs: 'learned',
  /** sim/replica-assign.ts's MAX_REPLICAS (not imported: --help loads no simulator module). */
  maxReplicas: 64,
} as const;

export const SIM_SERVE_DEFAULTS = { publishMs: 50, kvEventsEncoding: 'map' } as const;
