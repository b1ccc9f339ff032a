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
 * Bodies (request-body.ts). The declared Content-Length is checked against --max-body and reserved in the body
 * budget (--max-body-memory, body-budget.ts) before a byte is buffered; a chunked body reserves
 * as it arrives. The reservation is released in finished(). A compressed body (gzip, deflate,
 * br) is decoded off the loop before parsing (request-encoding.ts); other codings get 415.
 *
 * Models. A model no backend serves gets 404 `model_not_found` before routing; a model whose
 * backends are all down or drained gets 503.
 *
 * Deadline (--request-timeout). From arrival: before anything was sent it becomes a 504; mid-
 * response an in-band error (SSE) or a cut connection, recorded as `interrupted`. Either way
 * the upstream request is aborted, so the engine stops working on it.
 *
 * Offload (docs/proxy.md "Prefill offload"). When the attempt's decision is `offload`, the
 * request runs in two phases: an OffloadAttempt (offload-attempt.ts) runs the prefill on the
 * prefill instance while the decode instance's ticket and in-flight slot are already held, then
 * hands back the decode body (with the prefill's `kv_transfer_params`, or the client's own when
 * the prefill failed or timed out: co-located), which is sent as any attempt's (relay, retries,
 * backpressure). settle() cancels a running prefill (client abort, deadline, internal error),
 * which aborts its upstream request; no decode request is sent then. The decode answer's
 * `kv_transfer_params` never reach the client (stripped, JSON and SSE; offload-bodies.ts).
 *
 * Shutdown. While the proxy closes, every response carries `connection: close` (the client
 * moves to another replica); after the pools closed, a request gets 503 `shutting_down`.
 *
 * Ticket invariant: `ticket >= 0` exactly while an attempt holds an open router ticket and a
 * backend in-flight slot; settle() is the only place that closes both, and every terminal
 * path (complete, upstream error, client abort, a throw in between) goes through it. An
 * offload's prefill ticket and slot are its OffloadAttempt's: closed when the prefill phase ends,
 * or by settle() (offload.cancel()) when the attempt ends first.
 * finished() is the one terminal point of the exchange: it runs exactly once, and gives back
 * the admission slot, the body reservation, the open-exchange count and the deadline timer.
 */
import { randomUUID } from 'node:crypto';

import type { ClientRequestHead, ClientResponse } from '../server/client-io.js';
import type { Dispatcher } from 'undici';

import { isKvrouteError } from '../../core/errors.js';
import { offloadReason } from '../../core/offload-reason.js';
import { queueFull, type Admittable } from './admission.js';
import type { Backend } from '../upstream/backend.js';
import { noBackendError, sendClientError, sendJson } from '../server/client-response.js';
import { ClientError, statusLine } from '../server/error-body.js';
import { REQUEST_ID, readIncomingHead, relayedResponseHeaders } from './forward-headers.js';
import { modelNotFound } from '../server/models-route.js';
import { OffloadAttempt } from '../offload/offload-attempt.js';
import { SseTransferParamsStripper, withoutTransferParams } from '../offload/offload-bodies.js';
import type { ObserverList, RequestOutcome, RequestRecord, UsageCounts } from '../observe/proxy-observer.js';
import type { ResolvedProxyOptions } from '../proxy-options.js';
import { shuttingDown, type ProxyState } from '../proxy-state.js';
import { RequestBodyReader, type BodySink } from './request-body.js';
import { classifyUpstreamError } from './upstream-errors.js';
import type { Endpoint, ParsedRequest } from './request-inputs.js';
import { scanRequest, scanRequestAsync, SYNC_SCAN_MAX_BYTES } from './request-scan.js';
import { SseUsageScanner, usageIn } from './usage-scan.js';

/** A held (non-streaming) body past this many bytes is written through instead. */
const HOLD_LIMIT = 8 * 2 ** 20;
const SSE_DONE = Buffer.from('data: [DONE]\n\n');
// Header names and values written on every response, pre-encoded: uWS copies a string into UTF-8
// on each call, a Buffer it reads in place.
const INSTANCE_HEADER = Buffer.from('x-kvroute-instance');
const REASON_HEADER = Buffer.from('x-kvroute-reason');
/** router.decision.predictedCachedTokens of the attempt that answered (docs/proxy.md). */
const PREDICTED_HEADER = Buffer.from('x-kvroute-predicted-cached-tokens');
const REASON_BYTES = new Map<string, Buffer>();
const reasonBytes = (reason: string): Buffer => {
  let bytes = REASON_BYTES.get(reason);
  if (bytes === undefined) REASON_BYTES.set(reason, (bytes = Buffer.from(reason)));
  return bytes;
};
/** What a finished exchange's body is replaced with (see finished()). */
const RELEASED = Buffer.alloc(0);

export interface ExchangeContext {
  state: ProxyState;
  observers: ObserverList;
  options: ResolvedProxyOptions;
}

export class ProxyExchange implements Dispatcher.DispatchHandlers, Admittable, BodySink {
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
  /** The request body on its way in (cap, budget, decoding); its reservation ends in finished(). */
  private readonly reader: RequestBodyReader;
  private deadline: NodeJS.Timeout | undefined;
  /** The request deadline passed: the upstream abort that follows is the proxy's, not a failure. */
  private timedOut = false;
  /** finished() has run. */
  private done = false;
  private parsed: ParsedRequest | undefined;

  private attempts = 0;
  private ticket = -1;
  private backend: Backend | undefined;
  private reason = '';
  /**
   * Appended to x-kvroute-reason when the request was meant to be keyed by tokens but fell back
   * to text chunks: `; keys=text (why)`. Empty otherwise.
   */
  private keysNote = '';
  private predictedCachedTokens = 0;
  /** offloadReason() of the attempt's decision ('' for a policy without the offload layer). */
  private offloadNote = '';
  /** The attempt's offload (its prefill phase, then the record), when its decision was one. */
  private offload: OffloadAttempt | undefined;
  /** The decode carries transferred KV: its answer loses `kv_transfer_params`; when it was sent. */
  private decodeWithParams = false;
  private decodeSentAt = 0;
  private stripper: SseTransferParamsStripper | undefined;
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
    // Counted from here to finished(), which every path below reaches exactly once.
    ctx.state.exchangeStarted();
    this.reader = new RequestBodyReader(ctx.options.maxBodyBytes, ctx.state.bodies, this);
    // Refusals before the body is read close the connection: its unread bytes must not be taken
    // for the next request.
    if (ctx.state.closed) {
      this.refuse(shuttingDown(), true);
      return;
    }
    if (!this.reader.open(head.contentLength, head.contentEncoding)) return;
    if (ctx.options.requestTimeoutMs > 0)
      this.deadline = setTimeout(() => this.deadlinePassed(), ctx.options.requestTimeoutMs);
    res.onData((chunk, isLast) => this.reader.data(chunk, isLast));
  }

  // ---- client request body (RequestBodyReader's sink) -------------------------------------------

  /** BodySink: the request is still waiting for its body. */
  live(): boolean {
    return !this.aborted && !this.ended;
  }

  /** BodySink: the whole (decoded) body arrived. */
  whole(bytes: Buffer): void {
    this.bodyRead(bytes);
  }

  /** BodySink: the body was refused (too large, over the budget, a bad coding). */
  bodyFailed(error: unknown, closeConnection: boolean, headers: readonly string[] = []): void {
    this.refuseOrFail(error, closeConnection, headers);
  }

  /**
   * The whole (decoded) body: one addon call validates it and hashes its prompt (request-scan.ts),
   * on this thread for a small body, on the threadpool for a large one (the event loop then pays
   * ~25 µs whatever the size). `bytes` stays referenced by the pending scan until it settles.
   */
  private bodyRead(bytes: Buffer): void {
    const strip = this.ctx.options.stripExtensions;
    if (bytes.length <= SYNC_SCAN_MAX_BYTES) {
      let parsed: ParsedRequest;
      try {
        parsed = scanRequest(this.endpoint, bytes, this.session, strip);
      } catch (error) {
        this.refuseOrFail(error);
        return;
      }
      this.bodyParsed(parsed);
      return;
    }
    scanRequestAsync(this.endpoint, bytes, this.session, strip).then(
      (parsed) => {
        if (!this.aborted && !this.ended) this.bodyParsed(parsed);
      },
      (error: unknown) => this.refuseOrFail(error),
    );
  }

  /** Checks the body's model against the fleet, then admission. */
  private bodyParsed(parsed: ParsedRequest): void {
    this.parsed = parsed;
    parsed.route.model = parsed.model;
    const availability = this.ctx.state.modelAvailability(parsed.model);
    if (availability === 'unknown') {
      this.refuse(modelNotFound(parsed.model));
      return;
    }
    if (availability === 'unavailable') {
      this.refuse(noBackendError(parsed.model));
      return;
    }
    // A body's own hash_ids are the client's keys and win over tokens.
    if (parsed.route.idsFrom === 'text' && this.ctx.state.tokenizes(parsed.model)) {
      this.tokenize(parsed);
      return;
    }
    this.enterAdmission();
  }

  /**
   * Keys the request by its tokens (docs/kv-events.md "Token-exact keys"): the body goes to a
   * tokenizer worker, which returns its token ids (a token-id prompt as is; chat and text
   * rendered and encoded as vLLM does). Without them (no tokenizer for the model, a batch prompt,
   * a busy pool, a body the tokenizer cannot render) the request keeps its text-chunk keys, and
   * x-kvroute-reason says so. Never refuses a request the engine might take.
   */
  private tokenize(parsed: ParsedRequest): void {
    const pool = this.ctx.state.tokenizer;
    if (pool === undefined) {
      this.keysNote = '; keys=text (tokenizer not loaded)';
      this.enterAdmission();
      return;
    }
    const session = parsed.route.session === undefined ? undefined : String(parsed.route.session);
    pool.tokenizeBody(parsed.model, this.endpoint, parsed.body, session).then(
      (got) => {
        if (this.aborted || this.ended) return;
        if ('tokens' in got) {
          const route: ParsedRequest['route'] = { tokens: got.tokens, model: parsed.model };
          if (parsed.route.session !== undefined) route.session = parsed.route.session;
          parsed.route = route;
        } else this.keysNote = `; keys=text (${got.none})`;
        this.enterAdmission();
      },
      (error: unknown) => {
        if (this.aborted || this.ended) return;
        const code = (error as { code?: string }).code;
        this.keysNote =
          code === 'ERR_KVROUTE_TOKENIZER_BUSY' ? '; keys=text (tokenizer busy)' : '; keys=text (not tokenizable)';
        this.enterAdmission();
      },
    );
  }

  /** A ClientError is the client's mistake (refused); anything else is a bug (500). */
  private refuseOrFail(error: unknown, closeConnection = false, headers: readonly string[] = []): void {
    if (error instanceof ClientError) this.refuse(error, closeConnection, headers);
    else this.internalError(error);
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
      if (code === 'ERR_KVROUTE_NO_INSTANCE') this.refuse(noBackendError(parsed.model));
      else if (isKvrouteError(error)) this.refuse(new ClientError(400, error.message, 'invalid_field'));
      else throw error;
      return;
    }
    const instance = router.decision.instance!;
    const backend = state.backend(instance);
    if (backend === undefined) {
      router.abort(ticket); // removed between two events; cannot happen in one synchronous turn
      this.refuse(noBackendError(parsed.model));
      return;
    }
    this.ticket = ticket;
    this.backend = backend;
    this.reason = router.decision.reason;
    this.predictedCachedTokens = router.decision.predictedCachedTokens;
    // Read in place: valid until the next route(), so copied now.
    const offload = router.decision.offload;
    this.offloadNote = offloadReason(offload);
    const prefillTicket = offload.outcome === 'offload' ? offload.prefillTicket : -1;
    const prefillId = offload.prefillInstance;
    backend.inFlight++;
    if (observers.any)
      observers.onRouted(instance, this.reason, state.policyName, (performance.now() - started) * 1000);
    this.resetAttempt();
    if (prefillTicket < 0 || prefillId === undefined) {
      this.sendUpstream(parsed.body, false);
      return;
    }
    const context = { state, observers, timeoutMs: this.ctx.options.offloadPrefillTimeoutMs };
    this.offload = new OffloadAttempt(context, backend, prefillId, prefillTicket);
    this.offload.start(parsed.body, this.path, this.headers, (body, withParams) => this.sendUpstream(body, withParams));
  }

  /**
   * Sends the attempt's request to its backend: the client's body, or an offload's decode body
   * (`withParams`: with the prefill's kv_transfer_params, which its answer then loses).
   */
  private sendUpstream(body: Buffer, withParams: boolean): void {
    if (withParams) {
      this.decodeWithParams = true;
      this.decodeSentAt = performance.now();
    }
    const backend = this.backend!;
    backend.upstream.dispatch(
      { path: backend.basePath + this.path, method: 'POST', headers: this.headers, body },
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
    this.offload = undefined;
    this.decodeWithParams = false;
    this.stripper = undefined;
  }

  /** Closes the attempt's ticket and in-flight slot, and a running prefill's (idempotent). */
  private settle(completed: boolean): void {
    this.offload?.cancel();
    if (this.ticket < 0) return;
    const ticket = this.ticket;
    this.ticket = -1;
    this.backend!.inFlight--;
    if (completed) this.ctx.state.router.complete(ticket);
    else this.ctx.state.router.abort(ticket);
  }

  /**
   * The exchange is over: gives back what it held, then tells the observers. `error` says what
   * went wrong for every outcome but success.
   */
  private finished(status: number, outcome: RequestOutcome, usage?: UsageCounts, error?: string): void {
    if (this.done) return;
    this.done = true;
    const state = this.ctx.state;
    if (this.holdsSlot) {
      this.holdsSlot = false;
      state.admission.leave();
    }
    this.reader.release();
    if (this.deadline !== undefined) clearTimeout(this.deadline);
    state.exchangeEnded();
    const observers = this.ctx.observers;
    if (observers.any) {
      const e2eMs = performance.now() - this.t0;
      const model = this.parsed !== undefined && status !== 404 ? this.parsed.model : '';
      observers.onFinished(this.backend?.id, status, e2eMs, usage, outcome, model);
      if (observers.wantsRecords) observers.onRequest(this.record(status, outcome, e2eMs, usage, error));
    }
    // This object can outlive its request by a long time (uWS keeps a keep-alive connection's
    // last handlers until the next request on it): let go of the body and its ids now, so a burst
    // of huge prompts is given back when it ends.
    const parsed = this.parsed;
    if (parsed !== undefined) {
      parsed.body = RELEASED;
      parsed.route = { model: parsed.model };
    }
  }

  private record(
    status: number,
    outcome: RequestOutcome,
    e2eMs: number,
    usage: RequestRecord['usage'],
    error: string | undefined,
  ): RequestRecord {
    const record: RequestRecord = {
      startedAt: performance.timeOrigin + this.t0,
      requestId: this.requestId,
      path: this.path,
      status,
      outcome,
      attempts: this.backend === undefined ? 0 : this.attempts + 1,
      e2eMs,
    };
    if (error !== undefined) record.error = error;
    if (this.parsed !== undefined) record.model = this.parsed.model;
    if (this.backend !== undefined) {
      record.instance = this.backend.id;
      record.reason = this.reason;
    }
    const session = this.parsed?.route.session ?? this.session;
    if (session !== '') record.session = String(session);
    if (this.parsed !== undefined) record.stream = this.parsed.stream;
    if (this.ttftMs >= 0) record.ttftMs = this.ttftMs;
    if (usage !== undefined) record.usage = usage;
    if (this.offload !== undefined) record.offload = this.offload.record;
    return record;
  }

  // ---- undici DispatchHandlers ---------------------------------------------------------------

  onConnect(abort: (error?: Error) => void): void {
    this.abortUpstream = abort;
    if (this.aborted || this.timedOut) abort();
  }

  /** The response head: its fields as Buffers (undici) or latin1 strings (the h1 client). */
  onHeaders(
    statusCode: number,
    rawHeaders: readonly (Buffer | string)[],
    resume: () => void,
    statusText: string,
  ): boolean {
    if (statusCode < 200) return true; // 1xx: informational, the real head follows
    this.status = statusCode;
    this.statusText = statusText;
    this.resumeUpstream = resume;
    this.responseHeaders = relayedResponseHeaders(rawHeaders);
    this.holding = !(this.parsed!.stream && statusCode >= 200 && statusCode < 300);
    if (!this.holding && this.ctx.observers.any) this.sse = new SseUsageScanner();
    // An offload's decode: its answer may carry kv_transfer_params (not in a coded body, left alone).
    if (this.decodeWithParams && statusCode < 300 && !hasCoding(this.responseHeaders)) {
      if (!this.holding) this.stripper = new SseTransferParamsStripper();
    } else this.decodeWithParams = false;
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.aborted || this.ended) return true;
    if (!this.gotBody) {
      this.gotBody = true;
      this.ctx.state.router.onFirstToken(this.ticket);
      this.ttftMs = performance.now() - this.t0;
      const observers = this.ctx.observers;
      if (observers.any) {
        observers.onFirstByte(this.backend!.id, this.ttftMs);
        if (this.stripper !== undefined)
          observers.onOffloadTransfer(
            this.backend!.id,
            this.ctx.state.policyName,
            performance.now() - this.decodeSentAt,
          );
      }
    }
    if (this.stripper !== undefined) {
      chunk = this.stripper.feed(chunk);
      if (chunk.length === 0) return true;
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
    const close = this.ctx.state.closing;
    if (this.holding) {
      let body = this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held);
      this.held = [];
      if (this.decodeWithParams) body = withoutTransferParams(body);
      if (this.ctx.observers.any && status < 300) usage = usageIn(body);
      this.res.cork(() => {
        this.commit();
        this.res.end(body, close);
      });
    } else {
      // Streamed: a closing proxy's `connection: close` went out with the head (commit()); uWS
      // must not be asked to add it at end(), which would land inside the chunked body.
      const rest = this.stripper?.flush();
      if (rest !== undefined) this.sse?.feed(rest);
      this.res.cork(() => {
        if (!this.committed) this.commit();
        if (rest !== undefined) this.res.write(rest);
        this.res.end();
      });
    }
    this.ended = true;
    this.settle(true);
    this.finished(
      status,
      status < 400 ? 'success' : 'error',
      usage,
      status < 400 ? undefined : `engine answered ${status}`,
    );
  }

  onError(error: Error): void {
    if (this.aborted || this.timedOut) {
      this.settle(false);
      return;
    }
    if (this.ended) return;
    const backend = this.backend!;
    const { kind, trips } = classifyUpstreamError(error);
    const afterFirstByte = this.gotBody || this.committed;
    if (this.ctx.observers.any) this.ctx.observers.onUpstreamError(backend.id, kind, afterFirstByte);
    this.settle(false);
    if (!afterFirstByte) {
      if (trips) this.ctx.state.reportFailure(backend, `${kind}: ${error.message}`);
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
    this.failMidResponse(
      new ClientError(
        502,
        `upstream ${backend.id} failed mid-response (${kind}: ${error.message})`,
        'upstream_interrupted',
      ),
    );
  }

  /**
   * The response was under way when it failed (the engine, or the deadline): say so in-band,
   * never truncate silently. A held (non-streaming) body was not sent yet, so it becomes a
   * clean error status instead.
   */
  private failMidResponse(error: ClientError): void {
    this.ended = true;
    const what = `${error.code}: ${error.message}`;
    if (!this.committed) {
      this.held = [];
      sendJson(this.res, error.status, error.body(), [REQUEST_ID, this.requestId], this.ctx.state.closing);
      this.finished(error.status, 'error', undefined, what);
      return;
    }
    if (this.parsed!.stream && this.status < 300) {
      const event = `data: ${error.body()}\n\n`;
      this.res.cork(() => {
        this.res.write(event);
        this.res.end(SSE_DONE);
      });
    } else {
      // A written-through non-SSE body cannot carry an error: cut the connection so the
      // client sees an incomplete chunked response, not a silently short one.
      this.res.close();
    }
    this.finished(this.status, 'interrupted', undefined, what);
  }

  /** --request-timeout passed: stop the upstream request and answer (504, or in-band mid-response). */
  private deadlinePassed(): void {
    this.deadline = undefined;
    if (this.aborted || this.ended) return;
    this.timedOut = true;
    if (this.queued) {
      this.queued = false;
      this.ctx.state.admission.cancel(this);
    }
    // Aborting runs onError, which settles (timedOut tells it the abort is the proxy's own).
    this.abortUpstream?.();
    this.settle(false);
    const ms = this.ctx.options.requestTimeoutMs;
    const error = new ClientError(
      504,
      `the request did not finish within --request-timeout (${ms} ms)`,
      'request_timeout',
    );
    if (this.committed || this.gotBody) this.failMidResponse(error);
    else this.refuse(error);
  }

  /** Writes status and headers (inside a cork). */
  private commit(): void {
    const res = this.res;
    res.writeStatus(statusLine(this.status, this.statusText));
    const h = this.responseHeaders;
    for (let i = 0; i + 1 < h.length; i += 2) res.writeHeader(h[i]!, h[i + 1]!);
    // A streamed response's head goes out before its end(…, close) could add it.
    if (!this.holding && this.ctx.state.closing) res.writeHeader('connection', 'close');
    res.writeHeader(INSTANCE_HEADER, this.backend!.idBytes);
    // An offload note carries costs in ms: per request, so not cached.
    if (this.offloadNote !== '') res.writeHeader(REASON_HEADER, this.reason + this.offloadNote + this.keysNote);
    else res.writeHeader(REASON_HEADER, reasonBytes(this.keysNote === '' ? this.reason : this.reason + this.keysNote));
    res.writeHeader(PREDICTED_HEADER, String(this.predictedCachedTokens));
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
  private refuse(error: ClientError, closeConnection = false, headers: readonly string[] = []): void {
    if (this.aborted || this.ended) return;
    this.ended = true;
    const close = closeConnection || this.ctx.state.closing;
    sendClientError(this.res, error, close, [REQUEST_ID, this.requestId, ...headers]);
    this.finished(error.status, 'error', undefined, `${error.code}: ${error.message}`);
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
    this.finished(499, 'client_abort', undefined, 'the client closed the connection');
  }

  /** A bug, not an input: the request fails with a 500, its ticket closed, the process lives. */
  private internalError(error: unknown): void {
    this.settle(false);
    this.ctx.options.onWarning(`kvroute proxy: internal error: ${(error as Error)?.stack ?? String(error)}`);
    this.refuse(new ClientError(500, 'internal error in the proxy', 'upstream_error'));
  }
}

/** Whether relayed response headers name a content coding other than identity. */
function hasCoding(headers: readonly string[]): boolean {
  for (let i = 0; i + 1 < headers.length; i += 2)
    if (headers[i] === 'content-encoding' && headers[i + 1]!.trim().toLowerCase() !== 'identity') return true;
  return false;
}

/** Whether a flat [name, value, …] list (lowercase names) has `name`. */
function hasHeader(headers: readonly string[], name: string): boolean {
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === name) return true;
  return false;
}
