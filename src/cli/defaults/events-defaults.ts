/**
 * The defaults of `kvroute events relay`, in a file of their own: the command declaration
 * (../events-command.ts) prints them in --help and the verb applies them. Pure constants.
 */
export const EVENTS_DEFAULTS = {
  /** The stream keeps an hour of events: longer than a GPU prefix cache's turnover under load. */
  maxAge: '1h',
  maxBytes: '1GiB',
  statsIntervalMs: 10_000,
};
