/**
 * What a proxy is built from (`createProxy(options)`), with every default in one place. The
 * CLI's layered configuration (src/cli/serve-config.ts) produces exactly this shape; embedders
 * write it by hand.
 *
 * Invariant: `resolveProxyOptions` returns a fully filled, validated object, so the hot path
 * reads plain fields and never checks for undefined.
 */
import { DEFAULT_POLICY } from '../core/policy-spec.js';
import type { PolicyName, PolicySpec } from '../core/types.js';
import { COST_MODES, type CostMode } from '../core/cost-learning/cost-mode.js';
import { FlowConfigError, resolveFlowConfig, type FlowConfig } from '../flow/flow-config.js';
import { SharedSlots } from '../flow/slot-counter.js';
import { AGENT_SESSION_HEADERS, HEADER_NAME, sessionHeaderRanks } from './exchange/session-headers.js';
export { HEADER_NAME };
import type { ProxyObserver } from './observe/proxy-observer.js';
import {
  isSampleRatio,
  isSamplerName,
  SAMPLER_NAMES,
  tracesUrl,
  type TracingOptions,
} from './observe/tracing-options.js';
import { DEFAULT_DISCOVERY_INTERVAL_MS, type DiscoveryOptions } from './upstream/discovered-backends.js';
import { checkEventTemplates } from './upstream/discovery-events.js';
import { DISCOVER_EXPECTED, parseDiscoverSpec } from './upstream/dns-discovery.js';
import type { ProxyState } from './proxy-state.js';
import type { MountApp } from './server/route-table.js';
import {
  normaliseBackend,
  ProxyOptionError,
  resolveBackend,
  zmqEndpoint,
  type BackendSpec,
  type ResolvedBackend,
} from './upstream/backend-spec.js';

export { normaliseBackend, ProxyOptionError, resolveBackend, zmqEndpoint, type BackendSpec, type ResolvedBackend };

export { COST_MODES, type CostMode };

/**
 * Mounts extra routes (metrics, admin, dashboard) on the proxy's route table, which serves them
 * in either server mode. It may return a cleanup that `proxy.close()` runs first (e.g. ending
 * long-lived SSE responses, which would otherwise keep the server open); a cleanup must not throw.
 */
export type ProxyMount = (app: MountApp, state: ProxyState) => void | (() => void);

export interface ProxyOptions {
  /** Engine base URLs (`http://host:port`, optionally with a path prefix), or BackendSpecs. At least one. */
  backends: readonly (string | BackendSpec)[];
  /**
   * The HTTP server: `uws` (default; uWebSockets.js, the fastest) or `node` (Node's http module,
   * which also answers HTTP/1.0, Host-less HTTP/1.1 and requests with many headers; docs/proxy.md).
   */
  http?: 'uws' | 'node';
  /**
   * `http: 'node'`: a client's request head must arrive whole within this many ms from its first
   * byte (default 10,000, the timeout uWS applies itself), else 408 and the connection closed; it
   * bounds how long a slowloris client holds a socket. uWS mode has its own, fixed (~10 s).
   */
  headerTimeoutMs?: number;
  /** Routing policy (default `min_ttft`). */
  policy?: PolicyName | PolicySpec;
  /**
   * `learned` (default): the proxy learns each instance's costs from its own requests and prices
   * min_ttft with them (predicted seconds per instance); `fixed`: the preset's token-equivalents,
   * reproducible. The learned estimates are shown (/metrics, dashboard, admin API) either way
   * (docs/proxy.md "Learned costs").
   */
  costs?: CostMode;
  /**
   * Multiplies the learned costs' prior (the H20 preset's times) by this (default 1; 0 < X ≤ 100):
   * a learned estimate stays within 10× of its prior, so a fleet much faster or slower than the
   * preset wants one near it, e.g. 0.2 for engines 5× faster.
   */
  costPriorScale?: number;
  /**
   * min_ttft counts the expected prefill of sessions idle between turns on their instance
   * (docs/policies.md "Sessions between turns"; default true).
   */
  sessionReturns?: boolean;
  /** Header carrying the session id (default `x-session-id`); the body's `user` is the fallback. */
  sessionHeader?: string;
  /**
   * Headers coding agents send their session id in, read when `sessionHeader` is absent, first
   * present wins (default AGENT_SESSION_HEADERS: Claude Code's, Codex's, OpenCode's, …); [] reads none.
   */
  agentSessionHeaders?: readonly string[];
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
  /**
   * Completion requests' upstream client: `h1` (default), the lean keep-alive client of
   * h1-pool.ts, for http: backends (https: ones always use undici), or `undici`'s Pool.
   */
  upstream?: 'undici' | 'h1';
  /** Completion requests routed and forwarded at once; 0 (default): no limit (admission.ts). */
  maxInFlight?: number;
  /** Requests that may wait for a slot when at maxInFlight (default 1,024); past it, 429. */
  queueSize?: number;
  /** Longest wait for a slot, ms (default 30,000), of a class without its own deadline; then 429. */
  queueTimeoutMs?: number;
  /**
   * Flow control (docs/flow-control.md): tenants, priority classes, weights and rate limits, as
   * a FlowConfig or its raw form (a YAML `flow:` section), validated naming the bad key. Default:
   * tenants by header or API key, classes high/normal/low, equal weights, no rate limits.
   */
  flow?: unknown;
  /**
   * This proxy's share of its process's traffic, in (0, 1] (default 1): `serve --threads N` gives
   * each thread 1/N, and flow control's rate limits are scaled by it (thread-limits.ts).
   */
  flowShare?: number;
  /**
   * The slot count `serve --threads N` shares between its threads (thread-limits.ts), so the
   * process has one `--max-in-flight` and one queue, the main thread's. Internal.
   */
  flowSlots?: SharedArrayBuffer;
  /** Hear every request's lifecycle (metrics, logs, the dashboard). */
  observers?: readonly ProxyObserver[];
  /** Extra routes; each is called once with the uWS app before the proxy's own routes. */
  mounts?: readonly ProxyMount[];
  /** Active health probes (`GET <backend>/health`) of healthy backends every this many ms (default 2,000; 0: off). */
  healthIntervalMs?: number;
  /** A health probe's timeout, ms (default 2,000). */
  healthTimeoutMs?: number;
  /** Consecutive failed probes that open a healthy backend's breaker (default 2; 1 at start-up). */
  healthFailures?: number;
  /** Re-discovery of each backend's models (`GET /v1/models`) every this many ms (default 30,000; 0: only at start and on recovery). */
  modelsIntervalMs?: number;
  /** Sent as `Authorization: Bearer …` with model discovery (engines started with --api-key). */
  backendApiKey?: string;
  /** Overall deadline of a completion request from its arrival, ms (default 0: none); then 504, or an in-band error mid-stream. */
  requestTimeoutMs?: number;
  /**
   * An offloaded request's prefill phase (docs/proxy.md "Prefill offload") that has not answered
   * within this many ms is abandoned and the request served co-located on its decode instance
   * (default 60,000; 0: no limit but the pool's timeouts).
   */
  offloadPrefillTimeoutMs?: number;
  /** Request body bytes the proxy holds at once, over all requests (default 512 MiB); past it, 503 with Retry-After. */
  maxBodyMemoryBytes?: number;
  /**
   * Tokenizers for token-exact keys (docs/tokenize.md): model name → a directory holding
   * tokenizer.json and tokenizer_config.json, or `qwen3` for the bundled one; `*` for every other
   * model. A request whose model has one is tokenized (on worker threads) as vLLM would and keyed
   * by token blocks, which backends fed by KV events match exactly. Loaded by listen()/started(),
   * which reject naming the file that failed.
   */
  tokenizers?: Record<string, string>;
  /** Hears warnings (router feed warnings, backend state changes). Default: process.emitWarning. */
  onWarning?: (message: string) => void;
  /**
   * OpenTelemetry traces of every request (docs/tracing.md): `{ endpoint }` exports to an OTLP/HTTP
   * collector (`http://HOST:4318`), `{ exporter }` to a SpanExporter of yours. Absent: no tracing,
   * and the client's `traceparent` reaches the engine unchanged.
   */
  tracing?: TracingOptions;
  /**
   * Backends from DNS (docs/discovery.md): `{ spec: 'dns:NAME:PORT' | 'dns-srv:NAME', intervalMs?,
   * servers?, kvEvents?, kvReplay? }`, re-resolved every intervalMs (default 5,000). With it,
   * `backends` may be empty. kvEvents is each discovered engine's KV event source, `{host}` standing
   * for its address (`tcp://{host}:5557`), or the fleet's NATS stream; kvReplay its replay endpoint.
   */
  discovery?: DiscoveryOptions;
}

export type ResolvedProxyOptions = Required<
  Omit<
    ProxyOptions,
    'onWarning' | 'backends' | 'backendApiKey' | 'tokenizers' | 'flow' | 'flowSlots' | 'tracing' | 'discovery'
  >
> & {
  flow: FlowConfig;
  flowSlots: SharedArrayBuffer | undefined;
  backends: ResolvedBackend[];
  backendApiKey: string | undefined;
  tokenizers: Record<string, string> | undefined;
  onWarning: (message: string) => void;
  /** Session header name → precedence (session-headers.ts), from sessionHeader and agentSessionHeaders. */
  sessionRanks: ReadonlyMap<string, number>;
  tracing: TracingOptions | undefined;
  discovery: DiscoveryOptions | undefined;
};

export const PROXY_DEFAULTS = {
  policy: DEFAULT_POLICY,
  costs: 'learned' as CostMode,
  costPriorScale: 1,
  sessionReturns: true,
  sessionHeader: 'x-session-id',
  agentSessionHeaders: AGENT_SESSION_HEADERS,
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
  upstream: 'h1' as 'undici' | 'h1',
  maxInFlight: 0,
  queueSize: 1024,
  queueTimeoutMs: 30_000,
  http: 'uws' as 'uws' | 'node',
  headerTimeoutMs: 10_000,
  healthIntervalMs: 2_000,
  healthTimeoutMs: 2_000,
  healthFailures: 2,
  modelsIntervalMs: 30_000,
  requestTimeoutMs: 0,
  offloadPrefillTimeoutMs: 60_000,
  maxBodyMemoryBytes: 512 * 2 ** 20,
};

/** The discovery option, checked (its spec, interval and servers named in the error). */
function discoveryOptions(value: DiscoveryOptions | undefined): DiscoveryOptions | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || typeof value.spec !== 'string')
    throw new ProxyOptionError(`options.discovery needs a spec: ${DISCOVER_EXPECTED}`);
  if (parseDiscoverSpec(value.spec) === undefined)
    throw new ProxyOptionError(
      `options.discovery.spec must be ${DISCOVER_EXPECTED}, got ${JSON.stringify(value.spec)}`,
    );
  positiveInteger('options.discovery.intervalMs', value.intervalMs, DEFAULT_DISCOVERY_INTERVAL_MS, 100);
  if (
    value.servers !== undefined &&
    (!Array.isArray(value.servers) || value.servers.some((s) => typeof s !== 'string' || s === ''))
  )
    throw new ProxyOptionError('options.discovery.servers must be a list of DNS server addresses (HOST or HOST:PORT)');
  const { kvEvents, kvReplay, ...rest } = value;
  return {
    ...rest,
    ...checkEventTemplates(
      { kvEvents, kvReplay },
      { events: 'options.discovery.kvEvents', replay: 'options.discovery.kvReplay' },
    ),
  };
}

/** The tracing option, checked: an OTLP endpoint URL (its traces URL must form) or an exporter. */
function tracingOptions(value: TracingOptions | undefined): TracingOptions | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null) throw new ProxyOptionError('options.tracing must be an object');
  if (value.exporter === undefined) {
    if (typeof value.endpoint !== 'string')
      throw new ProxyOptionError('options.tracing needs an endpoint (the OTLP/HTTP collector URL) or an exporter');
    try {
      tracesUrl(value.endpoint);
    } catch (error) {
      throw new ProxyOptionError(`options.tracing.endpoint: ${(error as Error).message}`);
    }
  }
  if (value.serviceName !== undefined && (typeof value.serviceName !== 'string' || value.serviceName === ''))
    throw new ProxyOptionError('options.tracing.serviceName must be a non-empty string');
  if (value.sampler !== undefined && !isSamplerName(value.sampler))
    throw new ProxyOptionError(
      `options.tracing.sampler must be one of ${SAMPLER_NAMES.join(', ')}, got ${JSON.stringify(value.sampler)}`,
    );
  if (value.sampleRatio !== undefined) {
    if (!isSampleRatio(value.sampleRatio))
      throw new ProxyOptionError(
        `options.tracing.sampleRatio must be a number from 0 to 1, got ${JSON.stringify(value.sampleRatio)}`,
      );
    if (!value.sampler?.endsWith('traceidratio'))
      throw new ProxyOptionError(
        'options.tracing.sampleRatio needs sampler traceidratio or parentbased_traceidratio (the others take no ratio)',
      );
  }
  return value;
}

/** A list of HTTP header names, lower-cased; the default when absent. */
function headerNames(field: string, value: readonly string[] | undefined): readonly string[] {
  if (value === undefined) return PROXY_DEFAULTS.agentSessionHeaders;
  if (!Array.isArray(value)) throw new ProxyOptionError(`${field} must be a list of HTTP header names`);
  return value.map((name: unknown, k) => {
    if (typeof name !== 'string' || !HEADER_NAME.test(name))
      throw new ProxyOptionError(`${field}[${k}] must be an HTTP header name, got ${JSON.stringify(name)}`);
    return name.toLowerCase();
  });
}

function positiveInteger(field: string, value: number | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < min)
    throw new ProxyOptionError(`${field} must be an integer ≥ ${min}, got ${String(value)}`);
  return value;
}

function oneOf<T extends string>(field: string, value: unknown, allowed: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  if (!allowed.includes(value as T))
    throw new ProxyOptionError(`${field} must be ${allowed.map((a) => `'${a}'`).join(' or ')}, got ${String(value)}`);
  return value as T;
}

/** options.costPriorScale checked: a finite number in (0, 100]. */
/** A boolean option, or its default when absent; anything else is refused, naming the field. */
function booleanOption(field: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new ProxyOptionError(`${field} must be true or false, got ${String(value)}`);
  return value;
}

function priorScale(value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!(typeof value === 'number' && value > 0 && value <= 100))
    throw new ProxyOptionError(`options.costPriorScale must be a number in (0, 100], got ${String(value)}`);
  return value;
}

/** options.tokenizers checked: a map of non-empty model names to non-empty directories. */
function tokenizerMap(raw: unknown): Record<string, string> | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw))
    throw new ProxyOptionError('options.tokenizers must map model names to tokenizer directories');
  for (const [model, dir] of Object.entries(raw))
    if (model === '' || typeof dir !== 'string' || dir === '')
      throw new ProxyOptionError(
        `options.tokenizers["${model}"] must be a tokenizer directory, got ${JSON.stringify(dir)}`,
      );
  return { ...(raw as Record<string, string>) };
}

function share(value: number | undefined): number {
  if (value === undefined) return 1;
  if (!(typeof value === 'number' && value > 0 && value <= 1))
    throw new ProxyOptionError(`options.flowShare must be a number in (0, 1], got ${String(value)}`);
  return value;
}

function sharedSlots(value: SharedArrayBuffer | undefined): SharedArrayBuffer | undefined {
  if (value !== undefined && !(value instanceof SharedArrayBuffer && value.byteLength >= SharedSlots.bytesFor(1)))
    throw new ProxyOptionError(
      `options.flowSlots must be a SharedArrayBuffer of ${SharedSlots.bytesFor(1)} bytes or more`,
    );
  return value;
}

function flowConfig(raw: unknown): FlowConfig {
  try {
    return resolveFlowConfig(raw, 'options.flow');
  } catch (error) {
    if (error instanceof FlowConfigError) throw new ProxyOptionError(error.message);
    throw error;
  }
}

/** Fills defaults and checks every field. Backend URLs are normalised by normaliseBackend(). */
export function resolveProxyOptions(options: ProxyOptions): ResolvedProxyOptions {
  if (typeof options !== 'object' || options === null) throw new ProxyOptionError('options must be an object');
  const discovery = discoveryOptions(options.discovery);
  if (!Array.isArray(options.backends) || (options.backends.length === 0 && discovery === undefined))
    throw new ProxyOptionError('options.backends must list at least one backend URL (or set options.discovery)');
  const backends = options.backends.map((entry, k) => resolveBackend(entry, `options.backends[${k}]`));
  if (new Set(backends.map((b) => b.id)).size !== backends.length)
    throw new ProxyOptionError('options.backends lists a URL twice');
  if (
    options.backendApiKey !== undefined &&
    (typeof options.backendApiKey !== 'string' || options.backendApiKey === '')
  )
    throw new ProxyOptionError('options.backendApiKey must be a non-empty string');
  const sessionHeader = (options.sessionHeader ?? PROXY_DEFAULTS.sessionHeader).toLowerCase();
  if (!HEADER_NAME.test(sessionHeader))
    throw new ProxyOptionError(`options.sessionHeader must be an HTTP header name, got ${options.sessionHeader}`);
  const agentSessionHeaders = headerNames('options.agentSessionHeaders', options.agentSessionHeaders);
  const d = PROXY_DEFAULTS;
  const resolved: ResolvedProxyOptions = {
    backends,
    policy: options.policy ?? d.policy,
    costs: oneOf('options.costs', options.costs, COST_MODES, d.costs),
    costPriorScale: priorScale(options.costPriorScale, d.costPriorScale),
    sessionReturns: booleanOption('options.sessionReturns', options.sessionReturns, d.sessionReturns),
    sessionHeader,
    agentSessionHeaders,
    sessionRanks: sessionHeaderRanks(sessionHeader, agentSessionHeaders),
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
    upstream: oneOf('options.upstream', options.upstream, ['undici', 'h1'], d.upstream),
    http: oneOf('options.http', options.http, ['uws', 'node'], d.http),
    headerTimeoutMs: positiveInteger('options.headerTimeoutMs', options.headerTimeoutMs, d.headerTimeoutMs),
    healthIntervalMs: positiveInteger('options.healthIntervalMs', options.healthIntervalMs, d.healthIntervalMs, 0),
    healthTimeoutMs: positiveInteger('options.healthTimeoutMs', options.healthTimeoutMs, d.healthTimeoutMs),
    healthFailures: positiveInteger('options.healthFailures', options.healthFailures, d.healthFailures),
    modelsIntervalMs: positiveInteger('options.modelsIntervalMs', options.modelsIntervalMs, d.modelsIntervalMs, 0),
    backendApiKey: options.backendApiKey,
    requestTimeoutMs: positiveInteger('options.requestTimeoutMs', options.requestTimeoutMs, d.requestTimeoutMs, 0),
    offloadPrefillTimeoutMs: positiveInteger(
      'options.offloadPrefillTimeoutMs',
      options.offloadPrefillTimeoutMs,
      d.offloadPrefillTimeoutMs,
      0,
    ),
    maxBodyMemoryBytes: positiveInteger('options.maxBodyMemoryBytes', options.maxBodyMemoryBytes, d.maxBodyMemoryBytes),
    tokenizers: tokenizerMap(options.tokenizers),
    maxInFlight: positiveInteger('options.maxInFlight', options.maxInFlight, d.maxInFlight, 0),
    queueSize: positiveInteger('options.queueSize', options.queueSize, d.queueSize, 0),
    queueTimeoutMs: positiveInteger('options.queueTimeoutMs', options.queueTimeoutMs, d.queueTimeoutMs),
    flow: flowConfig(options.flow),
    flowShare: share(options.flowShare),
    flowSlots: sharedSlots(options.flowSlots),
    observers: options.observers ?? [],
    mounts: options.mounts ?? [],
    onWarning: options.onWarning ?? ((message) => process.emitWarning(message, { code: 'KVROUTE_PROXY' })),
    tracing: tracingOptions(options.tracing),
    discovery,
  };
  if (resolved.maxBodyMemoryBytes < resolved.maxBodyBytes)
    throw new ProxyOptionError(
      `options.maxBodyMemoryBytes (${resolved.maxBodyMemoryBytes}) must be at least options.maxBodyBytes (${resolved.maxBodyBytes}), or no body of the largest allowed size could be read`,
    );
  return resolved;
}
