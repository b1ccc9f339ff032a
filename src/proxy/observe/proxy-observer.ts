/**
 * The seam for everything that watches the proxy without being on its critical path: Prometheus
 * /metrics, request logs, the dashboard. createProxy({ observers }) takes any number of these;
 * the server calls them synchronously at each lifecycle point of a request.
 *
 * Contract for implementers:
 * - Every callback is optional and runs on the proxy's event loop: keep it O(1) (bump a
 *   counter, observe a histogram). Anything slower belongs in a queue drained elsewhere.
 * - An observer that throws is a bug in the observer; the proxy catches it, warns once per
 *   observer, and carries on, so a metrics bug can never fail a request.
 * - Per request: onRouted once per attempt (a retry routes again), then at most one onFirstByte,
 *   then exactly one onFinished, then (for observers that have it) exactly one onRequest with
 *   the whole record. onUpstreamError/onRetry come between attempts; an offloaded attempt's
 *   onOffload after its onRouted and before its onFirstByte. The record is built only when some
 *   observer has onRequest.
 * - `instance` is the backend URL as configured (the router's instance id); undefined in
 *   onFinished when the request never reached routing (bad input, no healthy backend).
 */

/** Why an upstream attempt failed. */
export type UpstreamErrorKind =
  | 'refused' // connection refused or the host unreachable
  | 'connect_timeout' // TCP connect took longer than --connect-timeout
  | 'first_byte_timeout' // no response headers within --first-byte-timeout
  | 'idle_timeout' // the body went silent for --idle-timeout
  | 'reset' // the connection closed or reset mid-exchange
  | 'error'; // anything else undici reported

/**
 * How a request ended, beside its HTTP status:
 * - `success`: a status below 400, relayed whole;
 * - `error`: a status of 400 or more, relayed whole (the proxy's own refusal or the engine's);
 * - `interrupted`: the status went out, then the response was cut (the engine failed or went
 *   silent mid-stream, or the request deadline passed); the client saw an in-band error or a
 *   cut connection, whatever the status says;
 * - `client_abort`: the client went away first (status 499).
 */
export type RequestOutcome = 'success' | 'error' | 'interrupted' | 'client_abort';

/**
 * Why an offloaded request was served co-located after all: the prefill's connection failed
 * (`error`), it answered a non-2xx status (`status`), it did not answer within
 * --offload-prefill-timeout (`timeout`), or its answer had no usable `kv_transfer_params`
 * (`params`).
 */
export type OffloadFallback = 'error' | 'status' | 'timeout' | 'params';

/** What the request log records of an offloaded request (docs/proxy.md "Prefill offload"). */
export interface OffloadRecord {
  /** The instance that ran (or was to run) the prefill. */
  prefillInstance: string;
  /** From sending the prefill request to its end (answer, failure or timeout); absent while it ran. */
  prefillMs?: number;
  /** Set when the request fell back to co-located serving on the decode instance. */
  fallback?: OffloadFallback;
}

/** Token counts from the engine's `usage` (non-streaming body, or the SSE usage chunk). */
export interface UsageCounts {
  prompt_tokens: number;
  /** `usage.prompt_tokens_details.cached_tokens`; 0 when the engine omits it. */
  cached_tokens: number;
}

/** One finished completion request, whole: what a request log writes. */
export interface RequestRecord {
  /** When the request arrived, ms since the epoch. */
  startedAt: number;
  /** The client's `x-request-id`, or the one the proxy made and sent upstream and back. */
  requestId: string;
  /** The path as received, query included. */
  path: string;
  /** The HTTP status sent to the client; 499 when the client went away first. */
  status: number;
  /** How it ended; `interrupted` is a failure even with status 200. */
  outcome: RequestOutcome;
  /** What went wrong, for every outcome but success: the proxy's error code and message. */
  error?: string;
  /** The body's `model`, once the body was parsed. */
  model?: string;
  /** The backend of the last attempt; absent when the request was never routed. */
  instance?: string;
  /** The router's reason code for the last attempt. */
  reason?: string;
  /** The session id routing used, when there was one. */
  session?: string;
  /** The body's `stream`; absent when the body was never parsed. */
  stream?: boolean;
  /** Routing attempts: 1 + retries, 0 when never routed. */
  attempts: number;
  /** Arrival to the first upstream body byte, when there was one. */
  ttftMs?: number;
  /** Arrival to the end (or the failure). */
  e2eMs: number;
  /** From the engine's usage, when the response carried it. */
  usage?: UsageCounts;
  /** The last attempt was offloaded: its prefill instance, prefill time and fallback, if any. */
  offload?: OffloadRecord;
  /** Flow control's tenant (docs/flow-control.md), once the request reached admission. */
  tenant?: string;
  /** Its priority class, with `tenant`. */
  priority?: string;
  /** ms it waited in flow control's queue (0: a slot was free), with `tenant`. */
  queueMs?: number;
}

export interface ProxyObserver {
  /** The router placed an attempt. decisionMicros: the route() call's wall time. */
  onRouted?(instance: string, reason: string, policy: string, decisionMicros: number): void;
  /** The first upstream body byte arrived; ttftMs counts from the request's arrival. */
  onFirstByte?(instance: string, ttftMs: number): void;
  /**
   * The request is over. status: the HTTP status sent to the client (499 when the client went
   * away first). usage: when the response carried it. outcome: how it ended (a stream cut
   * mid-way is `interrupted` with status 200). model: the body's, for a known model ('' when the
   * body was never parsed or named a model no backend serves).
   */
  onFinished?(
    instance: string | undefined,
    status: number,
    e2eMs: number,
    usage: UsageCounts | undefined,
    outcome: RequestOutcome,
    model: string,
  ): void;
  /** An upstream attempt failed; `afterFirstByte` says whether the client already got bytes. */
  onUpstreamError?(instance: string, kind: UpstreamErrorKind, afterFirstByte: boolean): void;
  /** A request that failed on `instance` before its first byte is routed again. */
  onRetry?(instance: string): void;
  /** A backend's health changed (the circuit breaker opened or closed). */
  onBackendHealth?(instance: string, healthy: boolean): void;
  /** The request's whole record, once, after onFinished. */
  onRequest?(record: RequestRecord): void;
  /**
   * An offloaded attempt's prefill phase ended after prefillMs: its params went to the decode
   * instance `instance` (`fallback` undefined), or the request fell back to co-located serving
   * there. A phase cut short by the client or the deadline is not reported.
   */
  onOffload?(
    prefillInstance: string,
    instance: string,
    policy: string,
    prefillMs: number,
    fallback: OffloadFallback | undefined,
  ): void;
  /**
   * An offloaded, streamed decode sent its first body byte `ms` after it was dispatched: the KV
   * transfer from the prefill instance plus the first decode step, as the proxy sees them.
   */
  onOffloadTransfer?(instance: string, policy: string, ms: number): void;
  /**
   * Flow control's decision on a request of `tenant` in class `priority` (docs/flow-control.md):
   * `admitted` (waitMs 0 when a slot was free) or the cause of its refusal, after waitMs in the
   * queue; inputTokens is what its tenant's token bucket paid (0 for a refusal).
   */
  onFlow?(tenant: string, priority: string, outcome: FlowOutcome, waitMs: number, inputTokens: number): void;
  /** An admitted request of `tenant` ended having streamed `outputTokens` (charged to its token bucket). */
  onFlowOutput?(tenant: string, priority: string, outputTokens: number): void;
}

/** What flow control did with a request: let it through, or why not. */
export type FlowOutcome = 'admitted' | 'rate_limited' | 'queue_full' | 'queue_timeout' | 'shed';

type Callbacks = Required<ProxyObserver>;

/**
 * Fans one call out to every observer. Built once; each method is a plain loop with no
 * allocation when there are no observers.
 */
export class ObserverList implements Callbacks {
  private readonly warned = new Set<ProxyObserver>();
  readonly any: boolean;
  /** Some observer has onRequest: only then does the exchange build a RequestRecord. */
  readonly wantsRecords: boolean;

  constructor(
    private readonly observers: readonly ProxyObserver[],
    private readonly warn: (message: string) => void,
  ) {
    this.any = observers.length > 0;
    this.wantsRecords = observers.some((o) => typeof o.onRequest === 'function');
  }

  private failed(observer: ProxyObserver, hook: string, error: unknown): void {
    if (this.warned.has(observer)) return;
    this.warned.add(observer);
    this.warn(`kvroute proxy: an observer's ${hook} threw (further errors of it are ignored): ${String(error)}`);
  }

  onRouted(instance: string, reason: string, policy: string, decisionMicros: number): void {
    for (const o of this.observers) {
      try {
        o.onRouted?.(instance, reason, policy, decisionMicros);
      } catch (error) {
        this.failed(o, 'onRouted', error);
      }
    }
  }

  onFirstByte(instance: string, ttftMs: number): void {
    for (const o of this.observers) {
      try {
        o.onFirstByte?.(instance, ttftMs);
      } catch (error) {
        this.failed(o, 'onFirstByte', error);
      }
    }
  }

  onFinished(
    instance: string | undefined,
    status: number,
    e2eMs: number,
    usage: UsageCounts | undefined,
    outcome: RequestOutcome,
    model: string,
  ): void {
    for (const o of this.observers) {
      try {
        o.onFinished?.(instance, status, e2eMs, usage, outcome, model);
      } catch (error) {
        this.failed(o, 'onFinished', error);
      }
    }
  }

  onUpstreamError(instance: string, kind: UpstreamErrorKind, afterFirstByte: boolean): void {
    for (const o of this.observers) {
      try {
        o.onUpstreamError?.(instance, kind, afterFirstByte);
      } catch (error) {
        this.failed(o, 'onUpstreamError', error);
      }
    }
  }

  onRetry(instance: string): void {
    for (const o of this.observers) {
      try {
        o.onRetry?.(instance);
      } catch (error) {
        this.failed(o, 'onRetry', error);
      }
    }
  }

  onBackendHealth(instance: string, healthy: boolean): void {
    for (const o of this.observers) {
      try {
        o.onBackendHealth?.(instance, healthy);
      } catch (error) {
        this.failed(o, 'onBackendHealth', error);
      }
    }
  }

  onFlow(tenant: string, priority: string, outcome: FlowOutcome, waitMs: number, inputTokens: number): void {
    for (const o of this.observers) {
      try {
        o.onFlow?.(tenant, priority, outcome, waitMs, inputTokens);
      } catch (error) {
        this.failed(o, 'onFlow', error);
      }
    }
  }

  onFlowOutput(tenant: string, priority: string, outputTokens: number): void {
    for (const o of this.observers) {
      try {
        o.onFlowOutput?.(tenant, priority, outputTokens);
      } catch (error) {
        this.failed(o, 'onFlowOutput', error);
      }
    }
  }

  onRequest(record: RequestRecord): void {
    for (const o of this.observers) {
      try {
        o.onRequest?.(record);
      } catch (error) {
        this.failed(o, 'onRequest', error);
      }
    }
  }

  onOffload(
    prefillInstance: string,
    instance: string,
    policy: string,
    prefillMs: number,
    fallback: OffloadFallback | undefined,
  ): void {
    for (const o of this.observers) {
      try {
        o.onOffload?.(prefillInstance, instance, policy, prefillMs, fallback);
      } catch (error) {
        this.failed(o, 'onOffload', error);
      }
    }
  }

  onOffloadTransfer(instance: string, policy: string, ms: number): void {
    for (const o of this.observers) {
      try {
        o.onOffloadTransfer?.(instance, policy, ms);
      } catch (error) {
        this.failed(o, 'onOffloadTransfer', error);
      }
    }
  }
}
