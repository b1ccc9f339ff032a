/**
 * The defaults of `kvroute hash`, in a file of their own: the command declaration
 * (../hash-command.ts) prints them in --help and the verb applies them, and neither imports
 * the other for them (no command <-> verb import cycle). Pure constants: loads no verb code.
 */
export const HASH_DEFAULTS = { chunkBytes: 128 };
