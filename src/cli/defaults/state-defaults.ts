/**
 * The defaults of `kvroute state watch | publish | freshness`, in a file of their own: the command declaration
 * (../state-command.ts) prints them in --help and the verb applies them, and neither imports
 * the other for them (no command <-> verb import cycle). Pure constants: loads no verb code.
 */
export const STATE_DEFAULTS = {
  watchIntervalMs: 500,
  publishIntervalMs: 50,
  publishTimeoutMs: 1_000,
  freshnessDurationMs: 10_000,
  freshnessSampleMs: 10,
  stalenessMs: 2_000,
};
