/**
 * The defaults of `kvroute bench interference`, in a file of their own: the command declaration
 * (../bench-command.ts) prints them in --help and the verb applies them, and neither imports
 * the other for them (no command <-> verb import cycle). Pure constants: loads no verb code.
 */
export const BENCH_INTERFERENCE_DEFAULTS = { simSpeed: 1 } as const;
