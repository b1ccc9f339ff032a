/**
 * The settings of `kvroute serve`, named once: each one's flag, the kind of value it takes and,
 * for counts and durations, its minimum. The YAML key is the flag's name; the environment variable
 * is KVROUTE_ + the flag in upper snake case.
 *
 * Apart from serve-config.ts (which parses and layers the values) so that the command line can
 * declare the flags without loading the YAML parser: this module imports nothing.
 */
type Kind =
  | 'urls'
  | 'policy'
  | 'port'
  | 'host'
  | 'header'
  | 'headers'
  | 'bool'
  | 'count'
  | 'size'
  | 'engine-state'
  | 'ms'
  | 'token'
  | 'upstream'
  | 'http'
  | 'path'
  | 'secret'
  | 'zmq-urls'
  | 'tokenizers'
  | 'threads'
  | 'costs'
  | 'scale'
  | 'flow'
  | 'cluster'
  | 'nats-events'
  | 'otlp'
  | 'discover'
  | 'event-template'
  | 'hosts';

export interface Setting {
  flag: string;
  kind: Kind;
  /** Minimum for count and ms kinds. */
  min?: number;
}

/** Every setting, by flag name. The YAML key is the flag name; the variable is KVROUTE_<FLAG>. */
export const SETTINGS = [
  { flag: 'backends', kind: 'urls' },
  { flag: 'policy', kind: 'policy' },
  { flag: 'costs', kind: 'costs' },
  { flag: 'cost-prior-scale', kind: 'scale' },
  { flag: 'session-returns', kind: 'bool' },
  { flag: 'port', kind: 'port' },
  { flag: 'host', kind: 'host' },
  { flag: 'session-header', kind: 'header' },
  { flag: 'agent-session-headers', kind: 'headers' },
  { flag: 'strip-extensions', kind: 'bool' },
  { flag: 'retries', kind: 'count', min: 0 },
  { flag: 'max-body', kind: 'size' },
  { flag: 'engine-state', kind: 'engine-state' },
  { flag: 'block-size', kind: 'count', min: 1 },
  { flag: 'connections', kind: 'count', min: 1 },
  { flag: 'connect-timeout', kind: 'ms', min: 1 },
  { flag: 'first-byte-timeout', kind: 'ms', min: 1 },
  { flag: 'idle-timeout', kind: 'ms', min: 1 },
  { flag: 'admin-token', kind: 'token' },
  { flag: 'reconcile-interval', kind: 'ms', min: 0 },
  { flag: 'upstream', kind: 'upstream' },
  { flag: 'access-log', kind: 'path' },
  { flag: 'max-in-flight', kind: 'count', min: 0 },
  { flag: 'queue-size', kind: 'count', min: 0 },
  { flag: 'queue-timeout', kind: 'ms', min: 1 },
  { flag: 'http', kind: 'http' },
  { flag: 'header-timeout', kind: 'ms', min: 1 },
  { flag: 'health-interval', kind: 'ms', min: 0 },
  { flag: 'health-timeout', kind: 'ms', min: 1 },
  { flag: 'health-failures', kind: 'count', min: 1 },
  { flag: 'models-interval', kind: 'ms', min: 0 },
  { flag: 'backend-api-key', kind: 'secret' },
  { flag: 'request-timeout', kind: 'ms', min: 0 },
  { flag: 'offload-prefill-timeout', kind: 'ms', min: 0 },
  { flag: 'max-body-memory', kind: 'size' },
  { flag: 'kv-events', kind: 'zmq-urls' },
  { flag: 'kv-replay', kind: 'zmq-urls' },
  { flag: 'tokenizer', kind: 'tokenizers' },
  { flag: 'threads', kind: 'threads' },
  { flag: 'flow', kind: 'flow' },
  { flag: 'cluster', kind: 'cluster' },
  { flag: 'events', kind: 'nats-events' },
  { flag: 'otlp-endpoint', kind: 'otlp' },
  { flag: 'discover', kind: 'discover' },
  { flag: 'discover-interval', kind: 'ms', min: 100 },
  { flag: 'discover-dns-server', kind: 'hosts' },
  { flag: 'discover-kv-events', kind: 'event-template' },
  { flag: 'discover-kv-replay', kind: 'event-template' },
] as const satisfies readonly Setting[];

/** A setting's flag name, e.g. 'max-body'. */
export type SettingFlag = (typeof SETTINGS)[number]['flag'];

export const envName = (flag: string): string => `KVROUTE_${flag.toUpperCase().replaceAll('-', '_')}`;

export const SERVE_DEFAULTS = { port: 8000, host: '127.0.0.1', reconcileMs: 30_000, threads: 1 };

/** The most event loops `--threads` starts (a bound on a typo, far above any host's cores). */
export const MAX_THREADS = 256;
