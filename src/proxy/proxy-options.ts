/**
 * What a proxy is built from (`createProxy(options)`), with every default in one place. The
 * CLI's layered configuration (serve-config.ts) produces exactly this shape; embedders write it
 * by hand.
 *
 * Invariant: `resolveProxyOptions` returns a fully filled, validated object, so the hot path
 * reads plain fields and never checks for undefined.
 */
import type uWS from 'uWebSockets.js';

import type { PolicyName } from '../core/types.js';
import type { ProxyObserver } from './proxy-observer.js';
import type { ProxyState } from './proxy-state.js';

/**
 * Mounts extra routes (metrics, admin, dashboard) on the proxy's uWS app before its own catch-alls.
 * It may return a cleanup that `proxy.close()` runs first (e.g. ending long-lived SSE responses,
 * which would otherwise keep the server open); a cleanup must not throw.
 */
export type ProxyMount = (app: uWS.TemplatedApp, state: ProxyState) => void | (() => void);

export interface ProxyOptions {
  /** Engine base URLs (`http://host:port`, optionally with a path prefix). At least one. */
  backends: readonly string[];
  /** Routing policy (default `unified`). */
  policy?: PolicyName;
  /** Header carrying the session id (default `x-session-id`); the body's `user` is the fallback. */
  sessionHeader?: string;
  /** Remove kvroute's body extension fields (`hash_ids`) before forwarding (default false). */
  stripExtensions?: boolean;
  /** Re-routes after a failure before the first byte (default 2). */
  retries?: number;
  /** Request bodies above this many bytes get 413 (default 64 MiB). */
  maxBodyBytes?: number;
  /** `shadow` (default) or `{ shm }`: the engine-state feed (slot i = backend i). */
  engineState?: 'shadow' | { shm: string };
  /** Tokens per block for `hash_ids` (default 16). */
  blockSize?: number;
  /** Connection cap per backend (default 512). */
  connections?: number;
  /** TCP connect timeout, ms (default 5,000). */
  connectTimeoutMs?: number;
  /** Until the upstream's response headers, ms (default 600,000: non-streaming engines send them last). */
  firstByteTimeoutMs?: number;
  /** Longest silence between upstream body chunks, ms (default 300,000). */
  idleTimeoutMs?: number;
  /** First delay of a tripped backend's health probe, doubling up to `healthMaxBackoffMs` (default 250). */
  healthBackoffMs?: number;
  /** Longest delay between health probes (default 10,000). */
  healthMaxBackoffMs?: number;
  /** Completion requests' upstream client: `undici` (default) or `h1`, the lean keep-alive client (http: backends). */
  upstream?: 'undici' | 'h1';
  /** Completion requests routed and forwarded at once; 0 (default): no limit (admission.ts). */
  maxInFlight?: number;
  /** Requests that may wait for a slot when at maxInFlight (default 1,024); past it, 429. */
  queueSize?: number;
  /** Longest wait for a slot, ms (default 30,000); then 429. */
  queueTimeoutMs?: number;
  /** Hear every request's lifecycle (metrics, logs, the dashboard). */
  observers?: readonly ProxyObserver[];
  /** Extra routes; each is called once with the uWS app before the proxy's own routes. */
  mounts?: readonly ProxyMount[];
  /** Hears warnings (router feed warnings, backend state changes). Default: process.emitWarning. */
  onWarning?: (message: string) => void;
}

export type ResolvedProxyOptions = Required<Omit<ProxyOptions, 'onWarning'>> & {
  onWarning: (message: string) => void;
};

export const PROXY_DEFAULTS = {
  policy: 'unified' as PolicyName,
  sessionHeader: 'x-session-id',
  stripExtensions: false,
  retries: 2,
  maxBodyBytes: 64 * 2 ** 20,
  engineState: 'shadow' as const,
  blockSize: 16,
  connections: 512,
  connectTimeoutMs: 5_000,
  firstByteTimeoutMs: 600_000,
  idleTimeoutMs: 300_000,
  healthBackoffMs: 250,
  healthMaxBackoffMs: 10_000,
  upstream: 'undici' as 'undici' | 'h1',
  maxInFlight: 0,
  queueSize: 1024,
  queueTimeoutMs: 30_000,
};

/** A bad option of createProxy(): names the field. */
export class ProxyOptionError extends RangeError {
  readonly code = 'ERR_KVROUTE_INVALID_ARG_VALUE';
}

function positiveInteger(field: string, value: number | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min)
    throw new ProxyOptionError(`${field} must be an integer ≥ ${min}, got ${String(value)}`);
  return value;
}

function upstreamOption(value: unknown): 'undici' | 'h1' {
  if (value === undefined) return PROXY_DEFAULTS.upstream;
  if (value !== 'undici' && value !== 'h1')
    throw new ProxyOptionError(`options.upstream must be 'undici' or 'h1', got ${String(value)}`);
  return value;
}

/** Fills defaults and checks every field. Backend URLs are normalised by normaliseBackend(). */
export function resolveProxyOptions(options: ProxyOptions): ResolvedProxyOptions {
  if (typeof options !== 'object' || options === null) throw new ProxyOptionError('options must be an object');
  if (!Array.isArray(options.backends) || options.backends.length === 0)
    throw new ProxyOptionError('options.backends must list at least one backend URL');
  const backends = options.backends.map((url, k) => normaliseBackend(url, `options.backends[${k}]`));
  if (new Set(backends).size !== backends.length) throw new ProxyOptionError('options.backends lists a URL twice');
  const sessionHeader = (options.sessionHeader ?? PROXY_DEFAULTS.sessionHeader).toLowerCase();
  if (!/^[a-z0-9!#$%&'*+.^_`|~-]+$/.test(sessionHeader))
    throw new ProxyOptionError(`options.sessionHeader must be an HTTP header name, got ${options.sessionHeader}`);
  const d = PROXY_DEFAULTS;
  return {
    backends,
    policy: options.policy ?? d.policy,
    sessionHeader,
    stripExtensions: options.stripExtensions ?? d.stripExtensions,
    retries: positiveInteger('options.retries', options.retries, d.retries, 0),
    maxBodyBytes: positiveInteger('options.maxBodyBytes', options.maxBodyBytes, d.maxBodyBytes),
    engineState: options.engineState ?? d.engineState,
    blockSize: positiveInteger('options.blockSize', options.blockSize, d.blockSize),
    connections: positiveInteger('options.connections', options.connections, d.connections),
    connectTimeoutMs: positiveInteger('options.connectTimeoutMs', options.connectTimeoutMs, d.connectTimeoutMs),
    firstByteTimeoutMs: positiveInteger('options.firstByteTimeoutMs', options.firstByteTimeoutMs, d.firstByteTimeoutMs),
    idleTimeoutMs: positiveInteger('options.idleTimeoutMs', options.idleTimeoutMs, d.idleTimeoutMs),
    healthBackoffMs: positiveInteger('options.healthBackoffMs', options.healthBackoffMs, d.healthBackoffMs),
    healthMaxBackoffMs: positiveInteger('options.healthMaxBackoffMs', options.healthMaxBackoffMs, d.healthMaxBackoffMs),
    upstream: upstreamOption(options.upstream),
    maxInFlight: positiveInteger('options.maxInFlight', options.maxInFlight, d.maxInFlight, 0),
    queueSize: positiveInteger('options.queueSize', options.queueSize, d.queueSize, 0),
    queueTimeoutMs: positiveInteger('options.queueTimeoutMs', options.queueTimeoutMs, d.queueTimeoutMs),
    observers: options.observers ?? [],
    mounts: options.mounts ?? [],
    onWarning: options.onWarning ?? ((message) => process.emitWarning(message, { code: 'KVROUTE_PROXY' })),
  };
}

/**
 * A backend URL as the proxy keys it: `http(s)://host:port[/prefix]`, no trailing slash, no
 * query, no credentials. This string is the router's instance id and the `x-kvroute-instance`
 * header, so one spelling per backend matters.
 */
export function normaliseBackend(raw: unknown, field: string): string {
  if (typeof raw !== 'string' || !URL.canParse(raw))
    throw new ProxyOptionError(`${field} must be an http:// or https:// URL, got ${JSON.stringify(raw)}`);
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ProxyOptionError(`${field} must be an http:// or https:// URL, got ${JSON.stringify(raw)}`);
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '')
    throw new ProxyOptionError(`${field} must not carry credentials, a query or a fragment: ${JSON.stringify(raw)}`);
  return url.origin + url.pathname.replace(/\/+$/, '');
}
