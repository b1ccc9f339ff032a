/**
 * The defaults of `kvroute tune`, in a file of their own: the command declaration
 * (../tune-command.ts) prints them in --help and the verb applies them, and neither imports
 * the other for them (no command <-> verb import cycle). Pure constants: loads no verb code.
 */
import { DEFAULT_ENGINE_PRESET } from '../../sim/engine-preset.js';

export const TUNE_DEFAULTS = {
  samples: 32,
  /** Of --samples, the refining round's share: ⌊samples ÷ 4⌋. */
  refineShare: 4,
  seed: 1,
  objective: 'ttft_p90',
  aggregate: 'mean',
  instances: 8,
  engineState: 'shadow',
  preset: DEFAULT_ENGINE_PRESET,
} as const;
