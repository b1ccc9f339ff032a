/**
 * One engine behind the proxy: its undici Pool, its in-flight count, its circuit breaker and
 * the models it serves.
 *
 * Pool: keep-alive connections (undici's default, honouring the engine's Keep-Alive hint), at
 * most `connections` of them, no pipelining (one request per connection at a time, so aborting
 * a request closes only its own connection). Timeouts: `connect` for TCP connect,
 * `headersTimeout` = the first-byte timeout (until the response head), `bodyTimeout` = the idle
 * timeout (longest silence between body chunks). Health probes and model discovery go through
 * `control`, a pool of their own, so a completion pool busy with hundreds of long streams never
 * queues a probe behind them (which would read as a dead engine).
 *
 * Circuit breaker: closed (healthy) → open on a failure before the first byte (refused, reset,
 * timed out; see ProxyState.reportFailure for why one failure suffices) or on failed health
 * probes (backend-monitor.ts, which also closes it again). A backend starts open ("not yet
 * checked") and takes requests once its first probe passes. A removed backend stops probing.
 *
 * Models: pinned by configuration, else discovered from `GET /v1/models`; undefined while
 * unknown (never discovered: the engine has no /v1/models, or has not answered yet), and then
 * the backend takes requests for any model.
 */
import { Pool } from 'undici';

import { H1Pool } from './h1-pool.js';

export interface BackendTimeouts {
  connections: number;
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
  /** The completion hot path's client: undici's Pool or the lean H1Pool (http: backends only). */
  upstream?: 'undici' | 'h1';
}

/** One entry of an OpenAI `/v1/models` list: its `id` and whatever else the engine said. */
export interface ModelCard {
  id: string;
  object?: string;
  created?: number;
  owned_by?: string;
  [field: string]: unknown;
}

/** Connections of a backend's control pool (probes, discovery). */
const CONTROL_CONNECTIONS = 2;

export class Backend {
  /** The normalised URL: router instance id and `x-kvroute-instance`. */
  readonly id: string;
  /** `id` encoded once, for the response header. */
  readonly idBytes: Buffer;
  readonly origin: string;
  /** Path prefix before /v1/... ('' for a bare origin). */
  readonly basePath: string;
  readonly pool: Pool;
  /** Health probes and model discovery. */
  readonly control: Pool;
  /** Where completion requests go: `pool` itself, or an H1Pool (`upstream: 'h1'`, http: only). */
  readonly upstream: Pick<Pool, 'dispatch'> | H1Pool;
  /** Requests dispatched here and not yet finished (including ones started before a drain). */
  inFlight = 0;
  /** False while the circuit breaker is open, and until the first health probe passes. */
  healthy = false;
  /** The first health check has run (whatever its result). */
  checked = false;
  /** Drained by an operator: gets no new requests until removed. */
  drained = false;
  removed = false;
  /** Failures since the breaker last closed (observability). */
  failures = 0;
  /** What the last breaker opening was about (observability); '' while closed. */
  lastFailure = '';
  /** The models it serves; undefined: unknown, so it takes any model. */
  models: readonly ModelCard[] | undefined;
  /** Models pinned by configuration: never re-discovered. */
  readonly pinned: boolean;

  constructor(id: string, models: readonly string[] | undefined, timeouts: BackendTimeouts) {
    this.id = id;
    this.idBytes = Buffer.from(id);
    const url = new URL(id);
    this.origin = url.origin;
    this.basePath = url.pathname === '/' ? '' : url.pathname;
    this.pinned = models !== undefined;
    this.models = models?.map((model) => ({ id: model, object: 'model', owned_by: 'kvroute' }));
    this.pool = new Pool(this.origin, {
      connections: timeouts.connections,
      pipelining: 1,
      connect: { timeout: timeouts.connectTimeoutMs },
      headersTimeout: timeouts.firstByteTimeoutMs,
      bodyTimeout: timeouts.idleTimeoutMs,
    });
    this.control = new Pool(this.origin, {
      connections: CONTROL_CONNECTIONS,
      pipelining: 1,
      connect: { timeout: timeouts.connectTimeoutMs },
    });
    this.upstream =
      timeouts.upstream === 'h1' && url.protocol === 'http:' ? new H1Pool(this.origin, timeouts) : this.pool;
  }

  /** The ids of its models, or undefined while unknown. */
  modelIds(): string[] | undefined {
    return this.models?.map((m) => m.id);
  }

  /** Opens the breaker (if closed). Returns true when it was closed. */
  trip(why: string): boolean {
    this.failures++;
    if (!this.healthy) return false;
    this.healthy = false;
    this.lastFailure = why;
    return true;
  }

  /** Closes the breaker: the backend takes requests again. */
  recover(): void {
    this.healthy = true;
    this.failures = 0;
    this.lastFailure = '';
  }

  /** The pools finish in-flight requests then close (after graceMs, destroy() cuts them). */
  async close(graceMs: number): Promise<void> {
    this.removed = true;
    const h1 = this.upstream instanceof H1Pool ? this.upstream : undefined;
    const timer = setTimeout(() => {
      void this.pool.destroy().catch(() => {});
      void h1?.destroy();
    }, graceMs);
    timer.unref();
    try {
      await Promise.all([this.pool.close(), h1?.close()]);
    } catch {
      // destroyed meanwhile: the destroy() below settles it
    }
    clearTimeout(timer);
    await Promise.all([this.pool.destroy().catch(() => {}), h1?.destroy(), this.control.destroy().catch(() => {})]);
  }
}
