/**
 * `kvroute serve --cluster nats://HOST:PORT` / YAML `cluster:` (docs/scale-out.md, "One load
 * plane over NATS"): which NATS the replica joins, under which fleet name and replica id, and the
 * load plane's timings. A flag or variable gives the NATS URL(s) alone; YAML gives the URL, or a
 * map with the keys below.
 *
 * Every bad value is a ClusterOptionError whose message starts with where it came from and names
 * the key (`--cluster`, `config kvroute.yaml: cluster.ttl_ms`), so serve prints it as a usage error.
 */
import { hostname } from 'node:os';

export interface ClusterOptions {
  /** NATS server URLs (nats://host:port), tried in order. */
  servers: string[];
  /** The fleet: replicas of one fleet share a load plane (`kvroute.<fleet>.load.*`). */
  fleet: string;
  /** This replica's id in the fleet; default `<hostname>-<pid>`. */
  replica: string;
  /** How often the replica publishes its changed load and placements, ms. */
  flushMs: number;
  /** How often it publishes every instance's load (also its heartbeat), ms. */
  fullEveryMs: number;
  /** A peer not heard for this long is forgotten with its load, ms. */
  ttlMs: number;
}

export class ClusterOptionError extends Error {}

export const CLUSTER_DEFAULTS = { fleet: 'default', flushMs: 5, fullEveryMs: 1000, ttlMs: 3000 } as const;

/** A NATS subject token: letters, digits, `-` and `_` (no `.`, `*`, `>` or spaces). */
const TOKEN = /^[A-Za-z0-9_-]{1,128}$/;
const KEYS = ['nats', 'fleet', 'replica', 'flush_ms', 'full_every_ms', 'ttl_ms'];

/** The default replica id: the host name and pid, made a subject token. */
export function defaultReplicaId(): string {
  return `${hostname()}-${process.pid}`.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, 128);
}

export function parseClusterOptions(raw: unknown, source: string): ClusterOptions {
  const fail = (key: string, expected: string, got: unknown): never => {
    throw new ClusterOptionError(`${source}${key} must be ${expected}, got ${JSON.stringify(got)}`);
  };
  const map: Record<string, unknown> =
    typeof raw === 'string'
      ? { nats: raw }
      : typeof raw === 'object' && raw !== null && !Array.isArray(raw)
        ? (raw as Record<string, unknown>)
        : fail('', 'a nats:// URL or a map with nats, fleet, replica, flush_ms, full_every_ms, ttl_ms', raw);
  const mapKey = (key: string) => (typeof raw === 'string' ? '' : `.${key}`);
  for (const key of Object.keys(map))
    if (!KEYS.includes(key)) throw new ClusterOptionError(`${source}: unknown key "${key}"; known: ${KEYS.join(', ')}`);
  const nats = map.nats;
  if (typeof nats !== 'string' || nats.trim() === '')
    fail(mapKey('nats'), 'one or more nats://HOST:PORT URLs, comma-separated', nats);
  const servers = (nats as string)
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const server of servers) {
    let url: URL | undefined;
    try {
      url = new URL(server);
    } catch {
      url = undefined;
    }
    if (url === undefined || url.protocol !== 'nats:' || url.hostname === '' || url.pathname.replace('/', '') !== '')
      fail(mapKey('nats'), 'nats://HOST:PORT URLs', server);
  }
  const token = (key: string, fallback: string): string => {
    const v = map[key];
    if (v === undefined || v === null) return fallback;
    return typeof v === 'string' && TOKEN.test(v) ? v : fail(mapKey(key), 'letters, digits, - and _ only', v);
  };
  const ms = (key: string, fallback: number, min: number): number => {
    const v = map[key];
    if (v === undefined || v === null) return fallback;
    return Number.isInteger(v) && (v as number) >= min && (v as number) <= 3_600_000
      ? (v as number)
      : fail(mapKey(key), `an integer of milliseconds from ${min} to 3600000`, v);
  };
  const flushMs = ms('flush_ms', CLUSTER_DEFAULTS.flushMs, 1);
  const fullEveryMs = ms('full_every_ms', CLUSTER_DEFAULTS.fullEveryMs, 1);
  const ttlMs = ms('ttl_ms', CLUSTER_DEFAULTS.ttlMs, 1);
  if (fullEveryMs < flushMs) fail(mapKey('full_every_ms'), `at least flush_ms (${flushMs})`, fullEveryMs);
  if (ttlMs <= 2 * fullEveryMs)
    fail(mapKey('ttl_ms'), `more than twice full_every_ms (${fullEveryMs}), or live peers expire`, ttlMs);
  return {
    servers,
    fleet: token('fleet', CLUSTER_DEFAULTS.fleet),
    replica: token('replica', defaultReplicaId()),
    flushMs,
    fullEveryMs,
    ttlMs,
  };
}
