/**
 * The proxy's mutable state: the router, the backends (pool, health, models, in-flight), the budgets,
 * the shutdown phase, and what an admin API does to them (add, drain, remove a backend; policy).
 *
 * How a failed backend is kept out of routing (and out of a request's retry):
 * The Router excludes only drained or removed instances; it has no per-request exclusion. So:
 * - A failure before the first byte trips the backend's breaker at once and drains it in the
 *   router. The retry that follows calls route() again, which can no longer pick it; no
 *   per-request exclusion list is needed, and concurrent requests stop going there too.
 *   One failure suffices because a refused connect, a reset before any byte or a first-byte
 *   timeout already cost a client a retry; waiting for N of them would send N-1 more requests
 *   into the same hole (and the retry would need an exclusion the Router cannot express).
 * - Failed health probes trip it too (backend-monitor.ts); a backend starts tripped and takes
 *   requests once its first probe passes.
 * - When a probe succeeds, router.resumeInstance() puts it back with its cache model,
 *   shadow counters and sticky pins intact (a spurious trip costs one backoff of no traffic,
 *   not the cache model). Tickets opened before the trip stay valid throughout.
 * - An operator drain is separate (`drained`): a drained backend never comes back by a probe.
 *
 * Invariant: a backend is routable in the router iff healthy && !drained && !removed.
 *
 * Shutdown (close): `closing` turns /ready to 503 and puts `connection: close` on every response;
 * requests that still arrive on open connections are served while the pools are open; the
 * pools close once every open exchange has finished (or the grace period ran out, which cuts
 * them), and only then do late requests get 503 `shutting_down` with Retry-After.
 */
import { isDeepStrictEqual } from 'node:util';

import { TokenizerPool } from '../tokenize/tokenizer-pool.js';
import { Router } from '../core/router.js';
import { subscribeBackendEvents } from './upstream/backend-events.js';
import type { PolicyName, PolicySpec } from '../core/types.js';
import type { Admission } from './exchange/admission.js';
import { createAdmission, type AdmissionOptions } from './threads/shared-admission.js';
import { SessionTurns } from '../flow/session-turns.js';
import { ProxyCosts } from './proxy-costs.js';
import type { CostMode } from '../core/cost-learning/cost-mode.js';
import { Backend, type BackendTimeouts, type ModelCard } from './upstream/backend.js';
import { BackendMonitor, type MonitorOptions } from './upstream/backend-monitor.js';
import { BodyBudget } from './exchange/body-budget.js';
import type { ObserverList } from './observe/proxy-observer.js';
import { ClientError } from './server/error-body.js';
import { normaliseBackend, ProxyOptionError, type ResolvedBackend } from './upstream/backend-spec.js';
import type { FlowToPrimary, ThreadState } from './threads/thread-messages.js';
import { ThreadFlowReports } from './threads/thread-flow.js';

/**
 * A thread of `kvroute serve --threads N` other than the main one (docs/scale-out.md): it routes
 * with the main thread's shared core (`attach`) and mirrors the main thread's backends
 * (`state`, then applyThreadState()); it probes nothing and owns no feed. A backend that fails
 * before its first byte leaves the shared core at once, and `onTrip` tells the main thread,
 * whose breaker and probes bring it back.
 */
export interface ThreadRole {
  attach: number;
  state: ThreadState;
  onTrip(id: string, why: string): void;
  onFlow(message: FlowToPrimary): void;
  /** This thread's index, 1…N−1 (0 is the main thread). */
  index: number;
}

/** What an admin endpoint or the dashboard shows of a backend. */
export interface BackendSnapshot {
  id: string;
  healthy: boolean;
  drained: boolean;
  inFlight: number;
  failures: number;
  /** The models it serves; absent while unknown (it then takes any model). */
  models?: string[];
  /** Why the breaker is open, while it is. */
  lastFailure?: string;
}

/** Whether a backend can take a request for a model. */
export type ModelAvailability = 'routable' | 'unavailable' | 'unknown';

/** The key of backends whose models are unknown in the model index (not a valid model id: ids are non-empty). */
const ANY_MODEL = '';
const NO_BACKENDS: readonly Backend[] = [];

/** How long a removed backend's in-flight requests may run before its pool is destroyed. */
const REMOVE_GRACE_MS = 600_000;

export interface ProxyStateOptions extends BackendTimeouts, MonitorOptions, AdmissionOptions {
  maxBodyMemoryBytes: number;
}

export class ProxyState {
  readonly router: Router;
  /** The policy's name, cached for the hot path (router.policy copies an object). */
  policyName: string;
  /** The learned per-instance costs (`--costs`, proxy-costs.ts). */
  readonly costs: ProxyCosts;
  /** Flow control: --max-in-flight, its queue by class and tenant, rate limits (admission.ts). */
  readonly admission: Admission;
  /** Which arriving requests continue a session whose turn just ended (flow control keeps their place). */
  readonly sessionTurns = new SessionTurns();
  /** --max-body-memory (body-budget.ts). */
  readonly bodies: BodyBudget;
  /** Tokenizes request bodies for token keys (docs/tokenize.md) when configured; set by start(). */
  tokenizer: TokenizerPool | undefined;
  /** Some backend has a KV event endpoint: token-id prompts are then keyed by tokens too. */
  eventFed = false;
  /** More of /ready's body (serve's cluster link, docs/scale-out.md); threads get the main thread's. */
  readyDetail: (() => Record<string, unknown>) | undefined;
  private readonly tokenizerReady: Promise<TokenizerPool | undefined>;
  /** The first health check of every configured backend has run. */
  started = false;
  /** close() has begun: not ready, every response closes its connection. */
  closing = false;
  /** close() has closed the pools: completion requests get 503. */
  closed = false;
  /** Completion requests between arrival and their end. */
  private open = 0;
  private idleWaiters: Array<() => void> = [];
  private readonly backends = new Map<string, Backend>();
  /** Backends by model (indexModels()); undefined after any change, rebuilt on the next request. */
  private byModel: Map<string, Backend[]> | undefined;
  private readonly monitor: BackendMonitor;
  private readonly firstChecks: Promise<void>;
  private readonly thread: ThreadRole | undefined;
  /** The other threads' in-flight requests per backend (main thread of --threads N; setThreadInFlight). */
  private readonly threadInFlight = new Map<number, Record<string, number>>();
  /** Flow control now, the whole process: this thread's live, the other threads' reports (thread-flow.ts). */
  readonly threadFlow: ThreadFlowReports;

  constructor(
    backends: readonly ResolvedBackend[],
    routerOptions: {
      policy: PolicyName | PolicySpec;
      costs: CostMode;
      costPriorScale: number;
      sessionReturns: boolean;
      blockSize: number;
      engineState: 'shadow' | { shm: string };
      onWarning: (message: string) => void;
      /** Model → tokenizer directory (or `qwen3`), `*` for any other model. */
      tokenizers?: Record<string, string> | undefined;
      /** This state is a thread's mirror of the main thread's (see ThreadRole). */
      thread?: ThreadRole | undefined;
      /** Discovery adds event-fed backends: event-fed from the start (its tokenizer pool opens now). */
      discoveredEventFed?: boolean | undefined;
    },
    private readonly options: ProxyStateOptions,
    private readonly observers: ObserverList,
    private readonly warn: (message: string) => void,
  ) {
    this.admission = createAdmission(options, routerOptions.thread, () => this.router);
    this.threadFlow = new ThreadFlowReports(this.admission);
    this.bodies = new BodyBudget(options.maxBodyMemoryBytes);
    this.thread = routerOptions.thread;
    this.router = new Router({
      instances: [],
      policy: routerOptions.policy,
      blockSize: routerOptions.blockSize,
      // A thread's core is the main thread's, feed included.
      engineState: this.thread === undefined ? routerOptions.engineState : 'shadow',
      onWarning: routerOptions.onWarning,
      ...(this.thread === undefined ? {} : { attach: this.thread.attach }),
    });
    this.policyName = this.router.policy.name;
    this.costs = new ProxyCosts(this.router, routerOptions);
    this.monitor = new BackendMonitor(
      options,
      {
        trip: (b, why) => this.tripped(b, why),
        recover: (b) => this.recovered(b),
        modelsChanged: (b, before) => this.modelsChanged(b, before),
      },
      warn,
    );
    if (this.thread !== undefined) this.applyThreadState(this.thread.state);
    else if (routerOptions.discoveredEventFed === true) this.eventFed = true;
    const checks = this.thread !== undefined ? [] : backends.map((b) => this.addBackend(b.id, b.models, b));
    // Event-fed backends key token-id prompts without tokenizer files (the pool's workers read the ids).
    this.tokenizerReady =
      routerOptions.tokenizers === undefined && !this.eventFed
        ? Promise.resolve(undefined)
        : TokenizerPool.open({ tokenizers: routerOptions.tokenizers ?? {} });
    // A load failure surfaces from start() (and so from listen()); never as an unhandled rejection.
    this.tokenizerReady.catch(() => {});
    this.firstChecks = Promise.all([Promise.all(checks), this.tokenizerReady]).then(([, pool]) => {
      this.tokenizer = pool;
      this.started = true;
    });
  }

  /** Whether a request for `model` on `endpoint` goes through the tokenizer before routing. */
  tokenizes(model: string): boolean {
    return this.eventFed || (this.tokenizer !== undefined && this.tokenizer.covers(model));
  }

  /** Resolves once every configured backend has had its first health check (and model discovery). */
  start(): Promise<void> {
    return this.firstChecks;
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

  /** Ready for traffic: started, not closing, and some backend routable. */
  ready(): boolean {
    return this.started && !this.closing && this.routableCount() > 0;
  }

  /** In-flight requests per backend id (the proxy's own count, every thread's; the router's is in router.stats()). */
  inFlight(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const b of this.backends.values()) out[b.id] = this.backendInFlight(b);
    return out;
  }

  /** This thread's in-flight requests per backend id (what a thread reports to the main thread). */
  ownInFlight(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const b of this.backends.values()) out[b.id] = b.inFlight;
    return out;
  }

  /** Another thread's in-flight counts (its latest report replaces the one before). */
  setThreadInFlight(thread: number, counts: Record<string, number> | undefined): void {
    if (counts === undefined) this.threadInFlight.delete(thread);
    else this.threadInFlight.set(thread, counts);
  }

  private backendInFlight(b: Backend): number {
    let n = b.inFlight;
    for (const counts of this.threadInFlight.values()) n += counts[b.id] ?? 0;
    return n;
  }

  /** What the other threads mirror (ThreadRole): the router's slots and groups, the backends. */
  threadState(): ThreadState {
    return {
      router: this.router.mirror(),
      eventFed: this.eventFed,
      flow: this.admission.config,
      ...(this.readyDetail === undefined ? {} : { readyDetail: this.readyDetail() }),
      backends: this.list().map((b) => ({
        id: b.id,
        models: b.models === undefined ? undefined : [...b.models],
        healthy: b.healthy,
        drained: b.drained,
        failures: b.failures,
        lastFailure: b.lastFailure,
      })),
    };
  }

  /**
   * A thread takes the main thread's state: names the shared core's slots, creates the pools of
   * new backends, closes those of removed ones (their open requests finish first), and copies
   * health, drain and models.
   */
  applyThreadState(state: ThreadState): void {
    this.router.adoptMirror(state.router);
    this.policyName = this.router.policy.name;
    this.eventFed = state.eventFed;
    this.readyDetail = state.readyDetail === undefined ? undefined : () => state.readyDetail!;
    if (!isDeepStrictEqual(state.flow, this.admission.config)) this.admission.configure(state.flow);
    const listed = new Set<string>();
    for (const b of state.backends) {
      listed.add(b.id);
      let backend = this.backends.get(b.id);
      if (backend === undefined) {
        backend = new Backend(b.id, undefined, this.options);
        this.backends.set(b.id, backend);
      }
      backend.models = b.models;
      backend.healthy = b.healthy;
      backend.drained = b.drained;
      backend.failures = b.failures;
      backend.lastFailure = b.lastFailure;
      backend.checked = true;
    }
    for (const [id, backend] of this.backends) {
      if (listed.has(id)) continue;
      this.backends.delete(id);
      void backend.close(REMOVE_GRACE_MS);
    }
    this.byModel = undefined;
  }

  snapshot(): BackendSnapshot[] {
    return this.list().map((b) => {
      const snapshot: BackendSnapshot = {
        id: b.id,
        healthy: b.healthy,
        drained: b.drained,
        inFlight: this.backendInFlight(b),
        failures: b.failures,
      };
      const models = b.modelIds();
      if (models !== undefined) snapshot.models = models;
      if (b.lastFailure !== '') snapshot.lastFailure = b.lastFailure;
      return snapshot;
    });
  }

  // ---- models ----------------------------------------------------------------------------------

  /**
   * Whether `model` can be served now: some routable backend serves it (or takes any model);
   * 'unavailable' when only unhealthy or drained ones do; 'unknown' when no backend lists it and
   * none takes any model (the request gets 404 without touching an engine).
   */
  modelAvailability(model: string): ModelAvailability {
    const index = (this.byModel ??= this.indexModels());
    let listed = false;
    for (const b of index.get(model) ?? NO_BACKENDS) {
      if (b.healthy && !b.drained) return 'routable';
      listed = true;
    }
    for (const b of index.get(ANY_MODEL) ?? NO_BACKENDS) {
      if (b.healthy && !b.drained) return 'routable';
      listed = true;
    }
    return listed ? 'unavailable' : 'unknown';
  }

  /** Backends by the model ids they list; ANY_MODEL keys those whose models are unknown. */
  private indexModels(): Map<string, Backend[]> {
    const index = new Map<string, Backend[]>();
    for (const b of this.backends.values()) {
      for (const id of b.modelIds() ?? [ANY_MODEL]) {
        const list = index.get(id);
        if (list === undefined) index.set(id, [b]);
        else list.push(b);
      }
    }
    return index;
  }

  /** The union of the routable backends' models, one card per id (the first backend to list it wins). */
  modelCards(): ModelCard[] {
    const seen = new Map<string, ModelCard>();
    for (const b of this.backends.values()) {
      if (!b.healthy || b.drained || b.models === undefined) continue;
      for (const card of b.models) if (!seen.has(card.id)) seen.set(card.id, card);
    }
    return [...seen.values()];
  }

  /** Routable backends per known model id, for /ready. */
  routableByModel(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const b of this.backends.values()) {
      for (const id of b.modelIds() ?? []) out[id] = (out[id] ?? 0) + (b.healthy && !b.drained ? 1 : 0);
    }
    return out;
  }

  // ---- backends ----------------------------------------------------------------------------------

  /**
   * Adds a backend (normalised URL), out of routing until its first health probe passes. Returns
   * its first check, which never rejects.
   */
  addBackend(
    url: string,
    models?: readonly string[],
    events: Pick<ResolvedBackend, 'kvEvents' | 'kvReplay'> = {},
  ): Promise<void> {
    const id = normaliseBackend(url, 'backend');
    if (this.backends.has(id)) throw new ProxyOptionError(`backend ${id} already exists`);
    const backend = new Backend(id, models, this.options);
    this.router.addInstance(id, { models: backend.modelIds() });
    if (events.kvEvents !== undefined) {
      subscribeBackendEvents(this.router, id, events.kvEvents, events.kvReplay);
      this.eventFed = true;
    }
    this.router.drainInstance(id); // until its first probe passes
    this.backends.set(id, backend);
    this.byModel = undefined;
    return this.monitor.watch(backend);
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
    this.byModel = undefined;
    this.monitor.unwatch(backend);
    await backend.close(REMOVE_GRACE_MS);
  }

  /** Switches the routing policy live (caches, counters and pins carry over). */
  setPolicy(policy: PolicyName | PolicySpec): void {
    this.router.setPolicy(policy);
    this.policyName = this.router.policy.name;
  }

  /** A failure before the first byte: open the breaker and take the backend out of routing. */
  reportFailure(backend: Backend, why: string): void {
    if (backend.removed) return;
    if (this.tripped(backend, why) && this.thread === undefined) this.monitor.tripped(backend);
  }

  // ---- exchanges and shutdown ---------------------------------------------------------------------

  /** A completion request arrived (pair with exchangeEnded()). */
  exchangeStarted(): void {
    this.open++;
  }

  exchangeEnded(): void {
    if (--this.open > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Completion requests between arrival and end. */
  get openExchanges(): number {
    return this.open;
  }

  /**
   * Shuts down: not ready at once; waits up to `graceMs` for open requests (new ones are still
   * served meanwhile), refuses the admission queue, then closes every pool (cutting what still
   * runs) and stops the health checks.
   */
  async close(graceMs: number): Promise<void> {
    this.closing = true;
    if (this.open > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.idleWaiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    this.closed = true;
    this.monitor.close();
    this.admission.close(shuttingDown());
    await Promise.all([
      ...this.list().map((b) => b.close(0)),
      this.router.close(),
      this.tokenizerReady.then(
        (pool) => pool?.close(),
        () => undefined,
      ),
    ]);
  }

  // ---- breaker transitions ----------------------------------------------------------------------

  /** Opens the breaker; true when it was closed. */
  private tripped(backend: Backend, why: string): boolean {
    if (!backend.trip(why)) return false;
    if (!backend.drained) this.router.drainInstance(backend.id);
    if (this.thread !== undefined) {
      // Out of the shared core for every thread now; the main thread warns, probes and resumes it.
      this.thread.onTrip(backend.id, why);
      return true;
    }
    this.warn(`kvroute proxy: backend ${backend.id} is unhealthy (${why}); probing ${backend.id}/health`);
    this.observers.onBackendHealth(backend.id, false);
    return true;
  }

  private recovered(backend: Backend): void {
    if (backend.removed || this.backends.get(backend.id) !== backend) return;
    const first = backend.failures === 0 && backend.lastFailure === '';
    backend.recover();
    if (!backend.drained) this.router.resumeInstance(backend.id);
    if (first) return; // joining at start is not a change of health
    this.warn(`kvroute proxy: backend ${backend.id} is healthy again`);
    this.observers.onBackendHealth(backend.id, true);
  }

  /** A backend's model list changed after it was first discovered (a restarted engine, a new LoRA adapter). */
  private modelsChanged(backend: Backend, before: readonly string[] | undefined): void {
    this.byModel = undefined;
    this.router.setInstanceModels(backend.id, backend.modelIds());
    if (before === undefined) return;
    const now = backend.modelIds()!;
    this.warn(
      `kvroute proxy: backend ${backend.id} now serves ${now.join(', ') || 'no models'} (was ${before.join(', ') || 'none'})`,
    );
  }

  private known(id: string): Backend {
    const backend = this.backends.get(id);
    if (backend === undefined) throw new ProxyOptionError(`backend ${id} is not known`);
    return backend;
  }
}

/** The 503 of a request that arrives after the proxy closed its pools. */
export function shuttingDown(): ClientError {
  return new ClientError(503, 'the proxy is shutting down; retry on another replica', 'shutting_down');
}
