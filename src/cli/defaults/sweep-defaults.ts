/**
 * The defaults of `kvroute sweep`, in a file of their own: the command declaration
 * (../sweep-command.ts) prints them in --help and the verb applies them, and neither imports
 * the other for them (no command <-> verb import cycle). Pure constants: loads no verb code.
 */
import { DEFAULT_ENGINE_PRESET } from '../../sim/engine-preset.js';

export const SWEEP_DEFAULTS = {
  policies: 'lmetric,load_only,sticky,unified,unified+A+B,min_ttft',
  engineStates: 'shadow,shm',
  instances: 8,
  liveInstances: 4,
  preset: DEFAULT_ENGINE_PRESET,
  costs: 'learned',
} as const;
