/**
 * Active health checks and model discovery for every backend.
 *
 * Health. Each backend is probed with `GET <base>/health` through its control pool, with a
 * short timeout (`healthTimeoutMs`, default 2 s):
 * - at start: one probe; a backend takes requests only once it passes (so /ready is honest
 *   from the first second, and a fleet that is down at start-up is reported down);
 * - while healthy: every `healthIntervalMs`; `healthFailures` failed probes in a row open the
 *   breaker, so a stalled engine (SIGSTOP, a hung GPU driver) stops getting new requests within
 *   about interval + failures × timeout, not after the first-byte timeout of 10 minutes;
 * - while open (a probe or a request failed): after `healthBackoffMs`, doubling up to
 *   `healthMaxBackoffMs`; the first passing probe closes it again.
 *
 * Why a probe tells a long prefill from a hang: an engine's HTTP server answers /health from its
 * own event loop while the GPU works (vLLM's API server runs apart from its engine core), so a
 * 30 s prefill leaves /health answering in milliseconds; a stopped or wedged process answers
 * nothing. Requests already running keep their long first-byte and idle timeouts: only new
 * requests are steered away.
 *
 * Models. Unless pinned by configuration, a backend's models come from `GET <base>/v1/models`
 * (with `Authorization: Bearer <backendApiKey>` when given): after the first passing probe, every
 * `modelsIntervalMs`, and before a recovered backend takes requests again (a restarted engine
 * may serve something else). A backend without the endpoint (404) or refusing it (401/403) keeps
 * unknown models, takes any model, and is warned about once.
 *
 * Hazards: every timer is unref'd and cleared by unwatch()/close(); a check in flight when
 * either runs settles into a no-op. One check per backend runs at a time.
 */
import type { Backend, ModelCard } from './backend.js';

export interface MonitorOptions {
  healthIntervalMs: number;
  healthTimeoutMs: number;
  healthFailures: number;
  healthBackoffMs: number;
  healthMaxBackoffMs: number;
  modelsIntervalMs: number;
  backendApiKey: string | undefined;
}

/** What the monitor changes, through the proxy state that owns the backends. */
export interface MonitorHooks {
  /** Probes failed: open the breaker (`why` says how). */
  trip(backend: Backend, why: string): void;
  /** A probe passed while the breaker was open (or at start): close it. */
  recover(backend: Backend): void;
  /** Discovery found a different model list (already set on the backend); `before`: the old ids, if any were known. */
  modelsChanged(backend: Backend, before: readonly string[] | undefined): void;
}

/** A discovery request gets at most this long per phase. */
const MODELS_TIMEOUT_MS = 5_000;

interface Watch {
  readonly backend: Backend;
  timer: NodeJS.Timeout | undefined;
  running: boolean;
  /** Failed probes in a row. */
  failures: number;
  backoffMs: number;
  /** When the models were last asked for, and /health last probed (ms, performance.now()). */
  modelsAt: number;
  probedAt: number;
  warned: Set<string>;
}

export class BackendMonitor {
  private readonly watches = new Map<Backend, Watch>();
  private closed = false;

  constructor(
    private readonly options: MonitorOptions,
    private readonly hooks: MonitorHooks,
    private readonly warn: (message: string) => void,
  ) {}

  /** Checks a new backend now (probe, then discovery) and keeps watching it. Resolves after that first check. */
  watch(backend: Backend): Promise<void> {
    const w: Watch = {
      backend,
      timer: undefined,
      running: false,
      failures: 0,
      backoffMs: this.options.healthBackoffMs,
      modelsAt: -Infinity,
      probedAt: -Infinity,
      warned: new Set(),
    };
    this.watches.set(backend, w);
    return this.check(w, true);
  }

  /** A request failure opened the breaker: probe on the backoff schedule from now on. */
  tripped(backend: Backend): void {
    const w = this.watches.get(backend);
    if (w === undefined || w.running) return; // a running check reschedules by itself
    w.backoffMs = this.options.healthBackoffMs;
    this.schedule(w, w.backoffMs);
  }

  unwatch(backend: Backend): void {
    const w = this.watches.get(backend);
    if (w === undefined) return;
    clearTimeout(w.timer);
    this.watches.delete(backend);
  }

  close(): void {
    this.closed = true;
    for (const w of this.watches.values()) clearTimeout(w.timer);
    this.watches.clear();
  }

  private live(w: Watch): boolean {
    return !this.closed && !w.backend.removed && this.watches.get(w.backend) === w;
  }

  private schedule(w: Watch, delayMs: number): void {
    clearTimeout(w.timer);
    w.timer = undefined;
    if (!this.live(w)) return;
    w.timer = setTimeout(() => void this.check(w, false), delayMs);
    w.timer.unref();
  }

  private async check(w: Watch, first: boolean): Promise<void> {
    w.timer = undefined;
    if (w.running || !this.live(w)) return;
    w.running = true;
    try {
      await this.checkOnce(w, first);
    } finally {
      w.running = false;
    }
    if (!this.live(w)) return;
    const b = w.backend;
    const o = this.options;
    if (!b.healthy) {
      this.schedule(w, w.backoffMs);
      w.backoffMs = Math.min(w.backoffMs * 2, o.healthMaxBackoffMs);
      return;
    }
    w.backoffMs = o.healthBackoffMs;
    // One timer per backend, at the shorter of the two periods; each tick does what is due.
    const periods = [o.healthIntervalMs, b.pinned ? 0 : o.modelsIntervalMs].filter((ms) => ms > 0);
    if (periods.length > 0) this.schedule(w, Math.min(...periods));
  }

  private async checkOnce(w: Watch, first: boolean): Promise<void> {
    const b = w.backend;
    const o = this.options;
    const now = performance.now();
    const probing = first || !b.healthy || (o.healthIntervalMs > 0 && now - w.probedAt >= o.healthIntervalMs - 1);
    if (probing) w.probedAt = now;
    const failure = probing ? await this.probe(b) : undefined;
    if (!this.live(w)) return;
    b.checked = true;
    if (failure !== undefined) {
      w.failures++;
      if (b.healthy && w.failures >= o.healthFailures) this.hooks.trip(b, failure);
      else if (first) {
        b.lastFailure = failure;
        this.warn(`kvroute proxy: backend ${b.id} failed its first health probe (${failure}); probing it`);
      }
      return;
    }
    w.failures = 0;
    const modelsDue = o.modelsIntervalMs > 0 && performance.now() - w.modelsAt >= o.modelsIntervalMs - 1;
    if (!b.pinned && (first || !b.healthy || modelsDue)) {
      w.modelsAt = performance.now();
      await this.discover(w);
      if (!this.live(w)) return;
    }
    if (!b.healthy) this.hooks.recover(b);
  }

  /** undefined when `GET /health` answered 2xx in time; else what went wrong. */
  private async probe(b: Backend): Promise<string | undefined> {
    const timeout = this.options.healthTimeoutMs;
    try {
      const { statusCode, body } = await b.control.request({
        path: `${b.basePath}/health`,
        method: 'GET',
        headersTimeout: timeout,
        bodyTimeout: timeout,
        signal: AbortSignal.timeout(timeout),
      });
      await body.dump();
      return statusCode >= 200 && statusCode < 300 ? undefined : `GET /health answered ${statusCode}`;
    } catch (error) {
      const e = error as { code?: string; name?: string; message?: string };
      if (e.name === 'TimeoutError' || e.code === 'UND_ERR_HEADERS_TIMEOUT' || e.code === 'UND_ERR_BODY_TIMEOUT')
        return `GET /health did not answer within ${timeout} ms`;
      return `GET /health failed: ${e.code ?? e.message ?? String(error)}`;
    }
  }

  /** Asks for the backend's models; sets them (and tells the hooks) when they changed. */
  private async discover(w: Watch): Promise<void> {
    const b = w.backend;
    const key = this.options.backendApiKey;
    let status: number;
    let list: unknown;
    try {
      const { statusCode, body } = await b.control.request({
        path: `${b.basePath}/v1/models`,
        method: 'GET',
        headers: key === undefined ? undefined : { authorization: `Bearer ${key}` },
        headersTimeout: MODELS_TIMEOUT_MS,
        bodyTimeout: MODELS_TIMEOUT_MS,
        signal: AbortSignal.timeout(MODELS_TIMEOUT_MS),
      });
      status = statusCode;
      list = statusCode === 200 ? await body.json() : await body.dump();
    } catch (error) {
      this.warnOnce(
        w,
        'unreachable',
        `kvroute proxy: cannot read ${b.id}/v1/models (${(error as { code?: string }).code ?? String(error)}); ${this.keeping(b)}`,
      );
      return;
    }
    if (status === 401 || status === 403) {
      this.warnOnce(
        w,
        'auth',
        `kvroute proxy: ${b.id}/v1/models answered ${status}: set --backend-api-key, or pin the backend's models ` +
          `(backends: [{url, models}]); ${this.keeping(b)}`,
      );
      return;
    }
    const cards = status === 200 ? modelCards(list) : undefined;
    if (cards === undefined) {
      this.warnOnce(
        w,
        'missing',
        `kvroute proxy: ${b.id}/v1/models answered ${status === 200 ? 'without a list of models' : status}; ` +
          `pin its models (backends: [{url, models}]); ${this.keeping(b)}`,
      );
      return;
    }
    const before = b.modelIds();
    b.models = cards;
    if (cards.map((m) => m.id).join('\n') !== before?.join('\n')) this.hooks.modelsChanged(b, before);
  }

  private keeping(b: Backend): string {
    return b.models === undefined
      ? 'until its models are known it takes requests for any model'
      : `keeping its last known models (${b.modelIds()!.join(', ')})`;
  }

  private warnOnce(w: Watch, kind: string, message: string): void {
    if (w.warned.has(kind)) return;
    w.warned.add(kind);
    this.warn(message);
  }
}

/** The entries of an OpenAI list body with a string id (deduplicated), or undefined if it is not one. */
export function modelCards(list: unknown): ModelCard[] | undefined {
  const data = (list as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return undefined;
  const seen = new Map<string, ModelCard>();
  for (const entry of data) {
    const id = (entry as { id?: unknown } | null)?.id;
    if (typeof id === 'string' && id !== '' && !seen.has(id)) seen.set(id, entry as ModelCard);
  }
  return [...seen.values()];
}
