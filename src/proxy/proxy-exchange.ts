/**
 * One completion request through the proxy: read the body (capped), route it (one router call
 * per attempt), dispatch it to the chosen engine's undici Pool, relay the response, and close
 * the router ticket exactly once.
 *
 * Lifecycle and the commit point. Nothing reaches the client before the upstream's first body
 * byte (or its end, for an empty body). Before that point every failure (refused, reset, a
 * timeout, even after a 200 head) is retryable: the ticket is aborted, the backend's breaker
 * trips (ProxyState.reportFailure, which drains it in the router), and route() runs again, at
 * most `retries` times. After it: a streaming (SSE) response ends with
 * `data: {"error":…}\n\n` + `data: [DONE]\n\n`; a non-streaming one, still held, becomes a
 * 502 JSON error. Upstream 4xx/5xx statuses pass through unchanged and are not retried.
 *
 * Relaying. A 2xx response to a `stream: true` request is written through chunk by chunk (SSE
 * bytes untouched). Anything else (non-streaming JSON, error bodies) is held until complete and
 * sent with one end(), which gives it a Content-Length and lets usage be read from it; a held
 * body past HOLD_LIMIT switches to write-through.
 *
 * Backpressure. When uWS write() returns false (its buffer is over the limit) onData returns
 * false, which pauses undici's socket read (and its body timeout); onWritable resumes it.
 * The client's slowness thus reaches the engine's TCP window, and the proxy buffers at most one
 * uWS backpressure limit plus one socket read per stream.
 *
 * Abort. onAborted is registered first in the handler. A client abort aborts the upstream
 * request at once (undici destroys its socket, so the engine sees the disconnect), aborts the
 * ticket, and no write touches the response afterwards.
 *
 * Admission (--max-in-flight, admission.ts). Once the body is read and valid the request enters
 * admission: it goes on at once, waits in the queue (admit() later routes it; expire() refuses
 * it with 429), or is refused with 429. A slot is held from admission to finished(), the one
 * terminal point of every path, which gives it back; a queued request whose client leaves is
 * cancelled from the queue and never held one.
 *
 * Ticket invariant: `ticket >= 0` exactly while an attempt holds an open router ticket and a
 * backend in-flight slot; settle() is the only place that closes both, and every terminal
 * path (complete, upstream error, client abort, a throw in between) goes through it.
 */
import { randomUUID } from 'node:crypto';

import type { ClientRequestHead, ClientResponse } from './client-io.js';
import type { Dispatcher } from 'undici';

import { isKvrouteError } from '../core/errors.js';
import { queueFull, type Admittable } from './admission.js';
import type { Backend } from './backend.js';
import { noBackendError, sendClientError, sendJson } from './client-response.js';
import { ClientError, errorJson, statusLine } from './error-body.js';
import { REQUEST_ID, readIncomingHead, relayedResponseHeaders } from './forward-headers.js';
import type { ObserverList, RequestRecord, UpstreamErrorKind } from './proxy-observer.js';
import type { ResolvedProxyOptions } from './proxy-options.js';
import type { ProxyState } from './proxy-state.js';
import { parseRequest, type Endpoint, type ParsedRequest } from './request-inputs.js';
import { SseUsageScanner, usageIn } from './usage-scan.js';

/** A held (non-streaming) body past this many bytes is written through instead. */
const HOLD_LIMIT = 8 * 2 ** 20;
const SSE_DONE = Buffer.from('data: [DONE]\n\n');
/** Request bodies declared up to this size are read into one preallocated buffer. */
const PREALLOCATE_LIMIT = 2 ** 20;

export interface ExchangeContext {
  state: ProxyState;
  observers: ObserverList;
  options: ResolvedProxyOptions;
}

/** undici error codes and errnos → the observer's kind; `trips` = counts against the backend. */
function classify(error: Error): { kind: UpstreamErrorKind; trips: boolean } {
  const code = (error as { code?: string }).code;
  switch (code) {
    case 'ECONNREFUSED':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return { kind: 'refused', trips: true };
    case 'UND_ERR_CONNECT_TIMEOUT':
      return { kind: 'connect_timeout', trips: true };
    case 'UND_ERR_HEADERS_TIMEOUT':
      return { kind: 'first_byte_timeout', trips: true };
    case 'UND_ERR_BODY_TIMEOUT':
      return { kind: 'idle_timeout', trips: true };
    case 'UND_ERR_SOCKET':
    case 'ECONNRESET':
    case 'EPIPE':
      return { kind: 'reset', trips: true };
    default:
      // UND_ERR_CLOSED / UND_ERR_DESTROYED (pool closing), invalid arguments: not the engine's fault.
      return { kind: 'error', trips: false };
  }
}

export class ProxyExchange implements Dispatcher.DispatchHandlers, Admittable {
  private readonly t0 = performance.now();
  /** Holds an admission slot (--max-in-flight): finished() gives it back, exactly once. */
  private holdsSlot = false;
  /** Waiting in the admission queue. */
  private queued = false;
  /** The client went away: never touch `res` again. */
  private aborted = false;
  /** The response has been ended by the proxy. */
  private ended = false;
  /** Status and headers are on the wire. */
  private committed = false;
  private readonly headers: string[];
  private readonly path: string;
  private readonly session: string;
  /** The client's x-request-id, else one made here; sent upstream and back to the client. */
  private readonly requestId: string;
  private body: Buffer | undefined;
  private bodyChunks: Buffer[] | undefined;
  private received = 0;
  private parsed: ParsedRequest | undefined;

  private attempts = 0;
  private ticket = -1;
  private backend: Backend | undefined;
  private reason = '';
  private abortUpstream: ((error?: Error) => void) | undefined;
  private resumeUpstream: (() => void) | undefined;
  private paused = false;
  private status = 0;
  private statusText = '';
  private responseHeaders: string[] = [];
  private gotBody = false;
  /** ms from arrival to the first upstream body byte; -1 before it. */
  private ttftMs = -1;
  private holding = true;
  private held: Buffer[] = [];
  private heldBytes = 0;
  private sse: SseUsageScanner | undefined;

  /** Call synchronously in the uWS handler: registers onAborted and onData, copies the request. */
  constructor(
    private readonly res: ClientResponse,
    req: ClientRequestHead,
    private readonly endpoint: Endpoint,
    private readonly ctx: ExchangeContext,
  ) {
    res.onAborted(() => this.clientAborted());
    const head = readIncomingHead(req, ctx.options.sessionHeader);
    const query = req.getQuery();
    this.path = query === undefined || query === '' ? req.getUrl() : `${req.getUrl()}?${query}`;
    this.headers = head.headers;
    this.session = head.session;
    this.requestId = head.requestId;
    if (this.requestId === '') this.headers.push(REQUEST_ID, (this.requestId = randomUUID()));
    if (head.contentLength > ctx.options.maxBodyBytes) {
      this.refuse(this.tooLarge(), true);
      return;
    }
    // One copy into a buffer of the declared size; a large declared size is not trusted with an
    // up-front allocation (headers alone must not cost the proxy 64 MiB), so its chunks are listed.
    if (head.contentLength >= 0 && head.contentLength <= PREALLOCATE_LIMIT)
      this.body = Buffer.allocUnsafe(head.contentLength);
    else this.bodyChunks = [];
    res.onData((chunk, isLast) => this.bodyData(chunk, isLast));
  }

  // ---- client request body -------------------------------------------------------------------

  private bodyData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.aborted || this.ended) return;
    const size = chunk.byteLength;
    if (this.received + size > this.ctx.options.maxBodyBytes) {
      this.refuse(this.tooLarge(), true);
      return;
    }
    // Copy now: uWS neuters the chunk when this callback returns.
    if (this.body !== undefined && this.received + size <= this.body.length) {
      this.body.set(new Uint8Array(chunk), this.received);
    } else {
      if (this.bodyChunks === undefined) this.bodyChunks = [this.body!.subarray(0, this.received)];
      this.body = undefined;
      this.bodyChunks.push(Buffer.from(new Uint8Array(chunk)));
    }
    this.received += size;
    if (!isLast) return;
    const bytes =
      this.bodyChunks !== undefined ? Buffer.concat(this.bodyChunks) : this.body!.subarray(0, this.received);
    this.bodyChunks = undefined;
    this.body = undefined;
    try {
      this.parsed = parseRequest(this.endpoint, bytes, this.session, this.ctx.options.stripExtensions);
    } catch (error) {
      if (error instanceof ClientError) this.refuse(error);
      else this.internalError(error);
      return;
    }
    this.enterAdmission();
  }

  // ---- admission (--max-in-flight) -------------------------------------------------------------

  private enterAdmission(): void {
    const admission = this.ctx.state.admission;
    const entry = admission.enter(this);
    if (entry === 'go') {
      this.holdsSlot = admission.limited;
      this.dispatch();
    } else if (entry === 'queued') this.queued = true;
    else this.refuse(queueFull(this.ctx.options));
  }

  /** Admittable: a slot came free (runs inside another request's finish). */
  admit(): void {
    this.queued = false;
    this.holdsSlot = true;
    this.dispatch();
  }

  /** Admittable: the wait ran out, or the proxy is closing. */
  expire(error: ClientError): void {
    this.queued = false;
    this.refuse(error);
  }

  private tooLarge(): ClientError {
    const max = this.ctx.options.maxBodyBytes;
    return new ClientError(413, `the request body exceeds --max-body (${max} bytes)`, 'body_too_large');
  }

  // ---- routing and upstream ------------------------------------------------------------------

  /** Routes one attempt and hands it to the backend's pool. */
  private dispatch(): void {
    try {
      this.routeAndSend();
    } catch (error) {
      this.internalError(error);
    }
  }

  private routeAndSend(): void {
    const { state, observers } = this.ctx;
    const router = state.router;
    const parsed = this.parsed!;
    const started = observers.any ? performance.now() : 0;
    let ticket: number;
    try {
      ticket = router.route(parsed.route);
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (code === 'ERR_KVROUTE_NO_INSTANCE') this.refuse(noBackendError());
      else if (isKvrouteError(error)) this.refuse(new ClientError(400, error.message, 'invalid_field'));
      else throw error;
      return;
    }
    const instance = router.decision.instance!;
    const backend = state.backend(instance);
    if (backend === undefined) {
      router.abort(ticket); // removed between two events; cannot happen in one synchronous turn
      this.refuse(noBackendError());
      return;
    }
    this.ticket = ticket;
    this.backend = backend;
    this.reason = router.decision.reason;
    backend.inFlight++;
    if (observers.any)
      observers.onRouted(instance, this.reason, state.policyName, (performance.now() - started) * 1000);
    this.resetAttempt();
    backend.upstream.dispatch(
      { path: backend.basePath + this.path, method: 'POST', headers: this.headers, body: parsed.body },
      this,
    );
  }

  private resetAttempt(): void {
    this.abortUpstream = undefined;
    this.resumeUpstream = undefined;
    this.paused = false;
    this.status = 0;
    this.gotBody = false;
    this.holding = true;
    this.held = [];
    this.heldBytes = 0;
    this.sse = undefined;
  }

  /** Closes the attempt's ticket and in-flight slot (idempotent). */
  private settle(completed: boolean): void {
    if (this.ticket < 0) return;
    const ticket = this.ticket;
    this.ticket = -1;
    this.backend!.inFlight--;
    if (completed) this.ctx.state.router.complete(ticket);
    else this.ctx.state.router.abort(ticket);
  }

  private finished(status: number, usage?: Parameters<ObserverList['onFinished']>[3]): void {
    if (this.holdsSlot) {
      this.holdsSlot = false;
      this.ctx.state.admission.leave();
    }
    const observers = this.ctx.observers;
    if (!observers.any) return;
    const e2eMs = performance.now() - this.t0;
    observers.onFinished(this.backend?.id, status, e2eMs, usage);
    if (observers.wantsRecords) observers.onRequest(this.record(status, e2eMs, usage));
  }

  private record(status: number, e2eMs: number, usage: RequestRecord['usage']): RequestRecord {
    const record: RequestRecord = {
      startedAt: performance.timeOrigin + this.t0,
      requestId: this.requestId,
      path: this.path,
      status,
      attempts: this.backend === undefined ? 0 : this.attempts + 1,
      e2eMs,
    };
    if (this.backend !== undefined) {
      record.instance = this.backend.id;
      record.reason = this.reason;
    }
    const session = this.parsed?.route.session ?? this.session;
    if (session !== '') record.session = String(session);
    if (this.parsed !== undefined) record.stream = this.parsed.stream;
    if (this.ttftMs >= 0) record.ttftMs = this.ttftMs;
    if (usage !== undefined) record.usage = usage;
    return record;
  }

  // ---- undici DispatchHandlers ---------------------------------------------------------------

  onConnect(abort: (error?: Error) => void): void {
    this.abortUpstream = abort;
    if (this.aborted) abort();
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    if (statusCode < 200) return true; // 1xx: informational, the real head follows
    this.status = statusCode;
    this.statusText = statusText;
    this.resumeUpstream = resume;
    this.responseHeaders = relayedResponseHeaders(rawHeaders);
    this.holding = !(this.parsed!.stream && statusCode >= 200 && statusCode < 300);
    if (!this.holding && this.ctx.observers.any) this.sse = new SseUsageScanner();
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.aborted || this.ended) return true;
    if (!this.gotBody) {
      this.gotBody = true;
      this.ctx.state.router.onFirstToken(this.ticket);
      this.ttftMs = performance.now() - this.t0;
      if (this.ctx.observers.any) this.ctx.observers.onFirstByte(this.backend!.id, this.ttftMs);
    }
    if (this.holding) {
      this.held.push(chunk);
      this.heldBytes += chunk.length;
      if (this.heldBytes <= HOLD_LIMIT) return true;
      // Too big to hold: write through from here on.
      this.holding = false;
      chunk = Buffer.concat(this.held);
      this.held = [];
    }
    this.sse?.feed(chunk);
    let ok = true;
    this.res.cork(() => {
      if (!this.committed) this.commit();
      ok = this.res.write(chunk);
    });
    if (ok) return true;
    this.paused = true;
    return false;
  }

  onComplete(): void {
    if (this.aborted || this.ended) return;
    if (!this.gotBody) this.ctx.state.router.onFirstToken(this.ticket);
    const status = this.status;
    let usage = this.sse?.usage;
    if (this.holding) {
      const body = this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held);
      this.held = [];
      if (this.ctx.observers.any && status < 300) usage = usageIn(body);
      this.res.cork(() => {
        this.commit();
        this.res.end(body);
      });
    } else {
      this.res.cork(() => {
        if (!this.committed) this.commit();
        this.res.end();
      });
    }
    this.ended = true;
    this.settle(true);
    this.finished(status, usage);
  }

  onError(error: Error): void {
    if (this.aborted) {
      this.settle(false);
      return;
    }
    if (this.ended) return;
    const backend = this.backend!;
    const { kind, trips } = classify(error);
    const afterFirstByte = this.gotBody || this.committed;
    if (this.ctx.observers.any) this.ctx.observers.onUpstreamError(backend.id, kind, afterFirstByte);
    this.settle(false);
    if (!afterFirstByte) {
      if (trips) this.ctx.state.reportFailure(backend);
      const code = (error as { code?: string }).code;
      const retryable = trips || code === 'UND_ERR_CLOSED' || code === 'UND_ERR_DESTROYED';
      if (retryable && this.attempts < this.ctx.options.retries) {
        this.attempts++;
        if (this.ctx.observers.any) this.ctx.observers.onRetry(backend.id);
        this.dispatch();
        return;
      }
      const timeout = kind.endsWith('timeout');
      this.refuse(
        new ClientError(
          timeout ? 504 : 502,
          `upstream ${backend.id} failed before responding (${kind}: ${error.message})` +
            (this.attempts > 0 ? ` after ${this.attempts} retr${this.attempts === 1 ? 'y' : 'ies'}` : ''),
          timeout ? 'upstream_timeout' : 'upstream_error',
        ),
      );
      return;
    }
    this.failAfterFirstByte(backend, kind, error);
  }

  /** The engine failed mid-response: say so in-band, never truncate silently. */
  private failAfterFirstByte(backend: Backend, kind: UpstreamErrorKind, error: Error): void {
    const message = `upstream ${backend.id} failed mid-response (${kind}: ${error.message})`;
    this.ended = true;
    if (!this.committed) {
      // A held (non-streaming) body: nothing sent yet, so a clean 502.
      this.held = [];
      sendJson(this.res, 502, errorJson(message, 'server_error', 'upstream_interrupted'), [REQUEST_ID, this.requestId]);
      this.finished(502);
      return;
    }
    if (this.parsed!.stream && this.status < 300) {
      const event = `data: ${errorJson(message, 'server_error', 'upstream_interrupted')}\n\n`;
      this.res.cork(() => {
        this.res.write(event);
        this.res.end(SSE_DONE);
      });
    } else {
      // A written-through non-SSE body cannot carry an error: cut the connection so the
      // client sees an incomplete chunked response, not a silently short one.
      this.res.close();
    }
    this.finished(this.status);
  }

  /** Writes status and headers (inside a cork). */
  private commit(): void {
    const res = this.res;
    res.writeStatus(statusLine(this.status, this.statusText));
    const h = this.responseHeaders;
    for (let i = 0; i + 1 < h.length; i += 2) res.writeHeader(h[i]!, h[i + 1]!);
    res.writeHeader('x-kvroute-instance', this.backend!.id);
    res.writeHeader('x-kvroute-reason', this.reason);
    // An engine that echoes the id (vLLM --enable-request-id-headers) already sent it.
    if (!hasHeader(h, REQUEST_ID)) res.writeHeader(REQUEST_ID, this.requestId);
    this.committed = true;
    if (!this.holding) res.onWritable(() => this.writable());
  }

  private writable(): boolean {
    if (this.paused && !this.aborted) {
      this.paused = false;
      this.resumeUpstream?.();
    }
    return true;
  }

  // ---- client side ends ----------------------------------------------------------------------

  /** Ends the response with an error before anything was sent. */
  private refuse(error: ClientError, closeConnection = false): void {
    if (this.aborted || this.ended) return;
    this.ended = true;
    sendClientError(this.res, error, closeConnection, [REQUEST_ID, this.requestId]);
    this.finished(error.status);
  }

  private clientAborted(): void {
    this.aborted = true;
    if (this.ended) return;
    this.ended = true;
    if (this.queued) {
      this.queued = false;
      this.ctx.state.admission.cancel(this);
    }
    // Aborting runs onError synchronously, which settles; settle() again is a no-op.
    this.abortUpstream?.();
    this.settle(false);
    this.finished(499);
  }

  /** A bug, not an input: the request fails with a 500, its ticket closed, the process lives. */
  private internalError(error: unknown): void {
    this.settle(false);
    this.ctx.options.onWarning(`kvroute proxy: internal error: ${(error as Error)?.stack ?? String(error)}`);
    this.refuse(new ClientError(500, 'internal error in the proxy', 'upstream_error'));
  }
}

/** Whether a flat [name, value, …] list (lowercase names) has `name`. */
function hasHeader(headers: readonly string[], name: string): boolean {
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === name) return true;
  return false;
}
