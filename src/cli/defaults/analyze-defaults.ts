/**
 * The defaults of `kvroute analyze trace | run | compare`, in a file of their own: the command declaration
 * (../analyze-command.ts) prints them in --help and the verb applies them, and neither imports
 * the other for them (no command <-> verb import cycle). Pure constants: loads no verb code.
 */
import { DEFAULT_MODEL_PRESET } from '../../trace/model-presets.js';

export const ANALYZE_DEFAULTS = { model: DEFAULT_MODEL_PRESET, sharedMinSessions: 8, slo: 'ttft=5s,tpot=100ms' };
