/**
 * The defaults of `kvroute replay`, in a file of their own: the command declaration
 * (../replay-command.ts) prints them in --help and the verb applies them, and neither imports
 * the other for them (no command <-> verb import cycle). Pure constants: loads no verb code.
 */
/** Repeated from src/replay/replay.ts (REPLAY_DEFAULTS) so that --help loads no replay code. */
export const REPLAY_CLI_DEFAULTS = {
  mode: 'session',
  seed: 1,
  speed: 1,
  grace: 10,
  connections: 256,
  maxConnectionFailures: 20,
  slo: 'ttft_p90=10,tpot_p90=0.1',
  maxTrials: 12,
  trialRequests: 500,
} as const;
