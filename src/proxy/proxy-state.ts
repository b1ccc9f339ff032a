/**
 * The proxy's mutable state: the router, the backends (pool, health, in-flight) and the
 * operations an admin API performs on them (add, drain, remove a backend; switch policy).
 *
 * How a failed backend is kept out of routing (and out of a request's retry):
 * The Router excludes only drained or removed instances; it has no per-request exclusion. So:
 * - A failure before the first byte trips the backend's breaker at once and drains it in the
 *   router. The retry that follows calls route() again, which can no longer pick it; no
 *   per-request exclusion list is needed, and concurrent requests stop going there too.
 *   One failure suffices because a refused connect, a reset before any byte or a first-byte
 *   timeout already cost a client a retry; waiting for N of them would send N-1 more requests
 *   into the same hole (and the retry would need an exclusion the Router cannot express).
 * - When a health probe succeeds, router.resumeInstance() puts it back with its cache model,
 *   shadow counters and sticky pins intact (a spurious trip costs one backoff of no traffic,
 *   not the cache model). Tickets opened before the trip stay valid throughout.
 * - An operator drain is separate (`drained`): a drained backend never comes back by a probe.
 *
 * Invariant: a backend is routable in the router iff healthy && !drained && !removed.
 */
import { Router } from '../core/router.js';
import type { PolicyName, PolicySpec } from '../core/types.js';
import { Admission, type AdmissionLimits } from './admission.js';
import { Backend, type BackendTimeouts } from './backend.js';
import type { ObserverList } from './proxy-observer.js';
import { ClientError } from './error-body.js';
import { normaliseBackend, ProxyOptionError } from './proxy-options.js';

/** What an admin endpoint or the dashboard shows of a backend. */
export interface BackendSnapshot {
  id: string;
  healthy: boolean;
  drained: boolean;
  inFlight: number;
  failures: number;
}

/** How long a removed backend's in-flight requests may run before its pool is destroyed. */
const REMOVE_GRACE_MS = 600_000;

export class ProxyState {
  readonly router: Router;
  /** The policy's name, cached for the hot path (router.policy copies an object). */
  policyName: string;
  /** --max-in-flight and its queue (admission.ts). */
  readonly admission: Admission;
  private readonly backends = new Map<string, Backend>();

  constructor(
    backendUrls: readonly string[],
    routerOptions: {
      policy: PolicyName;
      blockSize: number;
      engineState: 'shadow' | { shm: string };
      onWarning: (message: string) => void;
    },
    private readonly timeouts: BackendTimeouts,
    private readonly observers: ObserverList,
    private readonly warn: (message: string) => void,
    limits: AdmissionLimits = { maxInFlight: 0, queueSize: 0, queueTimeoutMs: 1 },
  ) {
    this.admission = new Admission(limits);
    this.router = new Router({
      instances: [],
      policy: routerOptions.policy,
      blockSize: routerOptions.blockSize,
      engineState: routerOptions.engineState,
      onWarning: routerOptions.onWarning,
    });
    this.policyName = this.router.policy.name;
    for (const url of backendUrls) this.addBackend(url);
  }

  /** The backend a router decision named (undefined if it was removed since). */
  backend(id: string): Backend | undefined {
    return this.backends.get(id);
  }

  /** Every backend, in the order added. */
  list(): Backend[] {
    return [...this.backends.values()];
  }

  /** Backends that take new requests. */
  routableCount(): number {
    let n = 0;
    for (const b of this.backends.values()) if (b.healthy && !b.drained) n++;
    return n;
  }

  /** In-flight requests per backend id (the proxy's own count; the router's is in router.stats()). */
  inFlight(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const b of this.backends.values()) out[b.id] = b.inFlight;
    return out;
  }

  snapshot(): BackendSnapshot[] {
    return this.list().map((b) => ({
      id: b.id,
      healthy: b.healthy,
      drained: b.drained,
      inFlight: b.inFlight,
      failures: b.failures,
    }));
  }

  /** Adds a backend (normalised URL); it takes requests at once. Returns its id. */
  addBackend(url: string): string {
    const id = normaliseBackend(url, 'backend');
    if (this.backends.has(id)) throw new ProxyOptionError(`backend ${id} already exists`);
    const backend = new Backend(id, this.timeouts, (b) => this.recovered(b));
    this.router.addInstance(id);
    this.backends.set(id, backend);
    return id;
  }

  /** Stops new requests to a backend; in-flight ones finish. It stays listed until removed. */
  drainBackend(id: string): void {
    const backend = this.known(id);
    if (backend.drained) return;
    backend.drained = true;
    if (backend.healthy) this.router.drainInstance(id); // an open breaker drained it already
  }

  /** Forgets a backend: no new requests; in-flight ones finish, then its pool closes. */
  async removeBackend(id: string): Promise<void> {
    const backend = this.known(id);
    this.router.removeInstance(id);
    this.backends.delete(id);
    await backend.close(REMOVE_GRACE_MS);
  }

  /** Switches the routing policy live (caches, counters and pins carry over). */
  setPolicy(policy: PolicyName | PolicySpec): void {
    this.router.setPolicy(policy);
    this.policyName = this.router.policy.name;
  }

  /** A failure before the first byte: open the breaker and take the backend out of routing. */
  reportFailure(backend: Backend): void {
    if (backend.removed || !backend.trip()) return;
    if (!backend.drained) this.router.drainInstance(backend.id);
    this.warn(`kvroute proxy: backend ${backend.id} is unhealthy; probing ${backend.id}/health`);
    this.observers.onBackendHealth(backend.id, false);
  }

  /** Refuses queued requests, then closes every pool (in-flight requests get `graceMs`, then are cut). */
  async close(graceMs: number): Promise<void> {
    this.admission.close(new ClientError(503, 'the proxy is shutting down', 'no_healthy_backend'));
    await Promise.all(this.list().map((b) => b.close(graceMs)));
  }

  private recovered(backend: Backend): void {
    if (backend.removed || this.backends.get(backend.id) !== backend) return;
    backend.recover();
    if (!backend.drained) this.router.resumeInstance(backend.id);
    this.warn(`kvroute proxy: backend ${backend.id} is healthy again`);
    this.observers.onBackendHealth(backend.id, true);
  }

  private known(id: string): Backend {
    const backend = this.backends.get(id);
    if (backend === undefined) throw new ProxyOptionError(`backend ${id} is not known`);
    return backend;
  }
}
