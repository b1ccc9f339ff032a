/**
 * One engine behind the proxy: its undici Pool, its in-flight count and its circuit breaker.
 *
 * Pool: keep-alive connections (undici's default, honouring the engine's Keep-Alive hint), at
 * most `connections` of them, no pipelining (one request per connection at a time, so aborting
 * a request closes only its own connection). Timeouts: `connect` for TCP connect,
 * `headersTimeout` = the first-byte timeout (until the response head), `bodyTimeout` = the idle
 * timeout (longest silence between body chunks).
 *
 * Circuit breaker: closed (healthy) → open on a failure before the first byte (refused, reset,
 * timed out; see ProxyState.reportFailure for why one failure suffices). While open, a probe
 * `GET <base>/health` runs after `backoffMs`, doubling up to `maxBackoffMs` after each failed
 * probe; the first 2xx probe closes the breaker (half-open → closed). Probes use the same pool
 * with short timeouts. A removed backend stops probing.
 *
 * Hazard: probe timers are unref'd and cleared by close(); a probe in flight when close() runs
 * settles into a no-op.
 */
import { Pool } from 'undici';

import { H1Pool } from './h1-pool.js';

export interface BackendTimeouts {
  connections: number;
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
  healthBackoffMs: number;
  healthMaxBackoffMs: number;
  /** The completion hot path's client: undici's Pool or the lean H1Pool (http: backends only). */
  upstream?: 'undici' | 'h1';
}

/** A probe gets at most this long per phase, whatever the request timeouts are. */
const PROBE_TIMEOUT_MS = 2_000;

export class Backend {
  /** The normalised URL: router instance id and `x-kvroute-instance`. */
  readonly id: string;
  readonly origin: string;
  /** Path prefix before /v1/... ('' for a bare origin). */
  readonly basePath: string;
  readonly pool: Pool;
  /** Where completion requests go: `pool` itself, or an H1Pool (`upstream: 'h1'`, http: only). */
  readonly upstream: Pick<Pool, 'dispatch'> | H1Pool;
  /** Requests dispatched here and not yet finished (including ones started before a drain). */
  inFlight = 0;
  /** False while the circuit breaker is open. */
  healthy = true;
  /** Drained by an operator: gets no new requests until removed. */
  drained = false;
  removed = false;
  /** Failures since the breaker last closed (observability). */
  failures = 0;
  private backoffMs: number;
  private probeTimer: NodeJS.Timeout | undefined;

  constructor(
    id: string,
    private readonly timeouts: BackendTimeouts,
    /** Called when a probe succeeds: the owner closes the breaker. */
    private readonly onProbeSuccess: (backend: Backend) => void,
  ) {
    this.id = id;
    const url = new URL(id);
    this.origin = url.origin;
    this.basePath = url.pathname === '/' ? '' : url.pathname;
    this.backoffMs = timeouts.healthBackoffMs;
    this.pool = new Pool(this.origin, {
      connections: timeouts.connections,
      pipelining: 1,
      connect: { timeout: timeouts.connectTimeoutMs },
      headersTimeout: timeouts.firstByteTimeoutMs,
      bodyTimeout: timeouts.idleTimeoutMs,
    });
    this.upstream =
      timeouts.upstream === 'h1' && url.protocol === 'http:' ? new H1Pool(this.origin, timeouts) : this.pool;
  }

  /** Opens the breaker (if closed) and schedules the first probe. Returns true when it was closed. */
  trip(): boolean {
    this.failures++;
    if (!this.healthy) return false;
    this.healthy = false;
    this.backoffMs = this.timeouts.healthBackoffMs;
    this.scheduleProbe();
    return true;
  }

  /** Closes the breaker: the backend takes requests again. */
  recover(): void {
    this.healthy = true;
    this.failures = 0;
    this.clearProbe();
  }

  /** Stops probing; the pool finishes in-flight requests then closes (destroy() cuts them). */
  async close(graceMs: number): Promise<void> {
    this.removed = true;
    this.clearProbe();
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
    await Promise.all([this.pool.destroy().catch(() => {}), h1?.destroy()]);
  }

  private clearProbe(): void {
    if (this.probeTimer !== undefined) clearTimeout(this.probeTimer);
    this.probeTimer = undefined;
  }

  private scheduleProbe(): void {
    this.clearProbe();
    if (this.removed) return;
    this.probeTimer = setTimeout(() => void this.probe(), this.backoffMs);
    this.probeTimer.unref();
  }

  private async probe(): Promise<void> {
    this.probeTimer = undefined;
    if (this.removed || this.healthy) return;
    let ok: boolean;
    try {
      const timeout = Math.min(PROBE_TIMEOUT_MS, this.timeouts.firstByteTimeoutMs);
      const { statusCode, body } = await this.pool.request({
        path: `${this.basePath}/health`,
        method: 'GET',
        headersTimeout: timeout,
        bodyTimeout: timeout,
      });
      await body.dump();
      ok = statusCode >= 200 && statusCode < 300;
    } catch {
      ok = false;
    }
    if (this.removed || this.healthy) return;
    if (ok) {
      this.onProbeSuccess(this);
      return;
    }
    this.backoffMs = Math.min(this.backoffMs * 2, this.timeouts.healthMaxBackoffMs);
    this.scheduleProbe();
  }
}
