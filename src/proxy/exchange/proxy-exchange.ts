/**
 * Long file: about 550 lines, one request's life, whose phases read best in one place; the body,
 * the relay, flow control and the offload are each in their own file.
 *
 * One completion request through the proxy, from its head to its last byte. Its walk, top to
 * bottom (paths under src/proxy/):
 *
 *   server    server/proxy-server.ts: the route table hands POST /v1/chat/completions and
 *             /v1/completions to a new ProxyExchange (uWS through server/uws.ts, or Node's http
 *             through server/node-shims.ts)
 *   exchange  exchange/proxy-exchange.ts, this file: the body (request-body.ts: capped,
 *             budgeted, decoded), its scan (request-scan.ts), the model check, token keys,
 *             admission (admission.ts)
 *   router    route() below: one decision and ticket of src/core/router.ts per attempt
 *   upstream  exchange/attempt-relay.ts sends the attempt to upstream/backend.ts's pool
 *             (upstream/h1-pool.ts, or undici), after offload/offload-attempt.ts's prefill when
 *             the decision is an offload
 *   relay     exchange/attempt-relay.ts: the answer to the client (commit point, held or
 *             streamed, backpressure); a failure before its first byte comes back here for a
 *             retry, with a new relay
 *   observe   finished() below: onFinished and the request record (observe/proxy-observer.ts:
 *             metrics, access log, dashboard)
 *
 * Phases (`phase`), and the only legal moves:
 *
 *   reading ─admission go─▶ attempting ─relayEnded / refuse─▶ ended
 *      └─admission queued─▶ queued ─admit─▶ attempting
 *   reading, queued, attempting ─refuse (bad body, unknown model, 429, 504, a bug)─▶ ended
 *   reading, queued, attempting ─the client leaves─▶ aborted
 *
 * - reading: the body is arriving, being decoded, scanned, keyed by tokens.
 * - queued: waiting for an admission slot (--max-in-flight).
 * - attempting: an AttemptRelay holds a router ticket and relays; retries stay in this phase.
 * - ended: the proxy ended the response. aborted: the client left first (499); after that
 *   nothing touches the response. Both run finished() once, on entering them.
 *
 * Admission (flow control: admission.ts, flow-ticket.ts, src/flow/). Once the body is read and
 * valid the request is identified (tenant, class; a bad header is a 400) and enters admission: it
 * goes on at once, waits in the queue (admit() later routes it; expire() refuses it with 429), or
 * is refused with 429 (queue full, rate limited). A slot (`slot`) is held from admission to
 * finished(), which gives it back; a queued request whose client leaves is cancelled from the
 * queue and never held one.
 *
 * Bodies (request-body.ts). The declared Content-Length is checked against --max-body and
 * reserved in the body budget (--max-body-memory, body-budget.ts) before a byte is buffered; a
 * chunked body reserves as it arrives. The reservation is released in finished(). A compressed
 * body (gzip, deflate, br) is decoded off the loop before parsing (request-encoding.ts); other
 * codings get 415.
 *
 * Models. A model no backend serves gets 404 `model_not_found` before routing; a model whose
 * backends are all down or drained gets 503.
 *
 * Retries. An attempt that fails before its answer's first byte (refused, reset, a timeout, even
 * after a 200 head) has its ticket aborted and its backend's breaker tripped
 * (ProxyState.reportFailure, which drains it in the router); route() runs again, at most
 * `retries` times, with a new AttemptRelay. After the first byte the relay answers the failure.
 *
 * Abort. onAborted is registered first in the handler. A client abort cancels the relay, which
 * aborts the upstream request at once (the engine sees the disconnect) and its ticket; no write
 * touches the response afterwards.
 *
 * Deadline (--request-timeout). From arrival: before anything was sent it becomes a 504; mid-
 * response an in-band error (SSE) or a cut connection, recorded as `interrupted`. Either way
 * the upstream request is aborted, so the engine stops working on it.
 *
 * Offload (docs/proxy.md "Prefill offload"): the relay runs it; a cancel() during the prefill
 * cancels the prefill's upstream request too, and no decode request is sent.
 *
 * Shutdown. While the proxy closes, every response carries `connection: close` (the client
 * moves to another replica); after the pools closed, a request gets 503 `shutting_down`.
 */
import { randomUUID } from 'node:crypto';

import { isKvrouteError } from '../../core/errors.js';
import { offloadReason } from '../../core/offload-reason.js';
import type {
  ObserverList,
  RequestOutcome,
  RequestRecord,
  UpstreamErrorKind,
  UsageCounts,
} from '../observe/proxy-observer.js';
import type { ResolvedProxyOptions } from '../proxy-options.js';
import { shuttingDown, type ProxyState } from '../proxy-state.js';
import type { ClientRequestHead, ClientResponse } from '../server/client-io.js';
import { noBackendError, sendClientError, sendClientErrorThenDrain } from '../server/client-response.js';
import { ClientError } from '../server/error-body.js';
import { modelNotFound } from '../server/models-route.js';
import type { Backend } from '../upstream/backend.js';
import type { Admission, Admittable } from './admission.js';
import { FlowTicket } from './flow-ticket.js';
import type { FlowOutcome } from '../observe/proxy-observer.js';
import type { RequestTrace } from '../observe/request-trace.js';
import type { Tracing } from '../observe/tracing.js';
import { apiDialect, type ApiDialect } from './api-dialect.js';
import { startTrace, traceAttempt } from './exchange-trace.js';
import { AttemptRelay, type RelayedRequest, type RelayOwner } from './attempt-relay.js';
import { REQUEST_ID, readIncomingHead } from './forward-headers.js';
import { RequestBodyReader, type BodySink } from './request-body.js';
import { scannedNatively, type Endpoint, type ParsedRequest } from './request-inputs.js';
import { scanRequest, scanRequestAsync, SYNC_SCAN_MAX_BYTES } from './request-scan.js';
import { upstreamFailure } from './upstream-errors.js';

/** What a finished exchange's body is replaced with (see finished()). */
const RELEASED = Buffer.alloc(0);
/** The codes of flow control's refusals (the rest of a queued request's refusals are the proxy closing). */
const FLOW_REFUSALS: ReadonlySet<string> = new Set(['queue_full', 'queue_timeout', 'rate_limited', 'shed']);

export type ExchangePhase = 'reading' | 'queued' | 'attempting' | 'ended' | 'aborted';

export interface ExchangeContext {
  state: ProxyState;
  observers: ObserverList;
  options: ResolvedProxyOptions;
  /** Request spans (observe/tracing.ts); undefined when tracing is off. */
  tracing: Tracing | undefined;
}

export class ProxyExchange implements Admittable, BodySink, RelayOwner {
  private readonly t0 = performance.now();
  private phase: ExchangePhase = 'reading';
  /** The admission whose slot this request holds (--max-in-flight); finished() gives it back. */
  private slot: Admission | undefined;
  private readonly headers: string[];
  /** Its tenant, class, queue wait and charged tokens (flow control). */
  private readonly flow: FlowTicket;
  private readonly path: string;
  private readonly session: string;
  /** The client's x-request-id, else one made here; sent upstream and back to the client. */
  private readonly requestId: string;
  /** The request body on its way in (cap, budget, decoding); its reservation ends in finished(). */
  private readonly reader: RequestBodyReader;
  private deadline: NodeJS.Timeout | undefined;
  private parsed: ParsedRequest | undefined;
  /**
   * Appended to x-kvroute-reason when the request was meant to be keyed by tokens but fell back
   * to text chunks: `; keys=text (why)`. Empty otherwise.
   */
  private keysNote = '';
  /** What every attempt sends and answers; made at the first route(). */
  private request: RelayedRequest | undefined;
  /** Retries so far. */
  private attempts = 0;
  /** This request's spans, when tracing is on. */
  private readonly trace: RequestTrace | undefined;
  /** The called API's usage keys and error shapes. */
  private readonly dialect: ApiDialect;
  /** The latest routed attempt (the request record's instance, reason, ttft and offload). */
  private relay: AttemptRelay | undefined;

  /** Call synchronously in the uWS handler: registers onAborted and onData, copies the request. */
  constructor(
    private readonly res: ClientResponse,
    req: ClientRequestHead,
    private readonly endpoint: Endpoint,
    private readonly ctx: ExchangeContext,
  ) {
    res.onAborted(() => this.clientAborted());
    this.dialect = apiDialect(endpoint);
    const head = readIncomingHead(req, ctx.options.sessionRanks, ctx.state.admission.flow.flowConfig);
    const query = req.getQuery();
    this.path = query === undefined || query === '' ? req.getUrl() : `${req.getUrl()}?${query}`;
    this.headers = head.headers;
    this.flow = new FlowTicket(head.flow, ctx.state, ctx.observers);
    this.session = head.session;
    this.requestId = head.requestId;
    if (this.requestId === '') this.headers.push(REQUEST_ID, (this.requestId = randomUUID()));
    if (ctx.tracing !== undefined) this.trace = startTrace(ctx.tracing, this.path, this.headers, this.t0);
    // Counted from here to finished(), which every path below reaches exactly once.
    ctx.state.exchangeStarted();
    this.reader = new RequestBodyReader(ctx.options.maxBodyBytes, ctx.state.bodies, this);
    // Refusals before the body is read close the connection (its unread bytes must not be taken
    // for the next request), after draining it: see refuse().
    if (ctx.state.closed) {
      this.refuse(shuttingDown(), true);
      return;
    }
    if (!this.reader.open(head.contentLength, head.contentEncoding)) return;
    if (ctx.options.requestTimeoutMs > 0)
      this.deadline = setTimeout(() => this.deadlinePassed(), ctx.options.requestTimeoutMs);
    res.onData((chunk, isLast) => this.reader.data(chunk, isLast));
  }

  /** The proxy ended the response, or the client left: finished() ran. */
  private over(): boolean {
    return this.phase === 'ended' || this.phase === 'aborted';
  }

  // ---- exchange: the client's request body (RequestBodyReader's sink) --------------------------

  /** BodySink: the request is still waiting for its body. */
  live(): boolean {
    return !this.over();
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
        if (!this.over()) this.bodyParsed(parsed);
      },
      (error: unknown) => this.refuseOrFail(error),
    );
  }

  /** Checks the body's model against the fleet, then admission. */
  private bodyParsed(parsed: ParsedRequest): void {
    this.parsed = parsed;
    parsed.route.model = parsed.model;
    this.trace?.model(parsed.model);
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
        if (this.over()) return;
        if ('tokens' in got) {
          const route: ParsedRequest['route'] = { tokens: got.tokens, model: parsed.model };
          if (parsed.route.session !== undefined) route.session = parsed.route.session;
          parsed.route = route;
        } else this.keysNote = `; keys=text (${got.none})`;
        this.enterAdmission();
      },
      (error: unknown) => {
        if (this.over()) return;
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

  // ---- exchange: flow control (admission.ts, src/flow/) ----------------------------------------

  private enterAdmission(): void {
    const admission = this.ctx.state.admission;
    const now = performance.now();
    let entry;
    try {
      entry = this.flow.entry(this.parsed!, this.ctx.options.blockSize, now);
    } catch (error) {
      this.refuseOrFail(error);
      return;
    }
    const result = admission.enter(this, entry);
    if (result === 'go') {
      if (admission.limited) this.slot = admission;
      this.flow.decided('admitted');
      this.dispatch();
    } else if (result === 'queued') {
      this.phase = 'queued';
      this.flow.queued(now);
    } else {
      this.flow.decided(result.code as FlowOutcome);
      this.refuse(result);
    }
  }

  /** Admittable: a slot came free (runs inside another request's finish). */
  admit(): void {
    this.slot = this.ctx.state.admission;
    this.flow.decided('admitted');
    this.dispatch();
  }

  /** Admittable: refused after it queued (its deadline passed; the main thread's queue was full), or the proxy is closing. */
  expire(error: ClientError): void {
    if (FLOW_REFUSALS.has(error.code)) this.flow.decided(error.code as FlowOutcome);
    this.refuse(error);
  }

  /** RelayOwner: a streamed answer's output tokens so far (flow control charges its tenant). */
  streamedTokens(total: number): void {
    this.flow.streamed(total);
  }

  // ---- router: one decision per attempt, then upstream and relay ---------------------------------

  /** Routes one attempt and hands it to its relay; a throw is a bug (500). */
  private dispatch(): void {
    this.phase = 'attempting';
    try {
      this.route();
    } catch (error) {
      this.internalError(error);
    }
  }

  private route(): void {
    const { state, observers } = this.ctx;
    const router = state.router;
    const parsed = this.parsed!;
    const started = observers.any ? performance.now() : 0;
    let ticket: number;
    const session = parsed.route.session === undefined ? '' : String(parsed.route.session);
    state.costs.arriving(session);
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
    const decision = router.decision;
    // The learned costs read the decision in place too, before anything else routes.
    state.costs.routed(ticket, session);
    // Read in place: valid until the next route(), so copied now.
    const offload = decision.offload;
    // vLLM's disaggregated-prefill exchange (kv_transfer_params) is chat's and completions': a
    // Messages or Responses request is served whole on its decode instance, its prefill ticket let go.
    const offloads = offload.outcome === 'offload' && scannedNatively(this.endpoint);
    if (offload.outcome === 'offload' && !offloads) router.abort(offload.prefillTicket);
    const relay = new AttemptRelay(this, this.relayedRequest(parsed), {
      ticket,
      backend,
      reason: decision.reason,
      predictedCachedTokens: decision.predictedCachedTokens,
      offloadNote: offloads || offload.outcome !== 'offload' ? offloadReason(offload) : '; offload: not for this API',
      prefillTicket: offloads ? offload.prefillTicket : -1,
      prefillInstance: offloads ? offload.prefillInstance : undefined,
    });
    this.relay = relay;
    if (observers.any)
      observers.onRouted(instance, relay.reason, state.policyName, (performance.now() - started) * 1000);
    if (this.trace !== undefined) traceAttempt(this.trace, this.headers, state, ticket, parsed.route);
    relay.start(parsed.body);
  }

  private relayedRequest(parsed: ParsedRequest): RelayedRequest {
    const { state, observers, options } = this.ctx;
    this.request ??= {
      res: this.res,
      state,
      observers,
      options,
      path: this.path,
      headers: this.headers,
      requestId: this.requestId,
      stream: parsed.stream,
      keysNote: this.keysNote,
      t0: this.t0,
      dialect: this.dialect,
    };
    return this.request;
  }

  /** RelayOwner: the attempt failed before its answer's first byte: retry, or answer 502/504. */
  attemptFailed(backend: Backend, kind: UpstreamErrorKind, error: Error, retryable: boolean): void {
    if (this.over()) return;
    this.trace?.attemptFailed(kind, error.message);
    if (retryable && this.attempts < this.ctx.options.retries) {
      this.attempts++;
      if (this.ctx.observers.any) this.ctx.observers.onRetry(backend.id);
      this.dispatch();
      return;
    }
    const timeout = kind.endsWith('timeout');
    const retries = this.attempts;
    this.refuse(
      upstreamFailure(
        timeout ? 504 : 502,
        timeout ? 'upstream_timeout' : 'upstream_error',
        backend.id,
        'before responding',
        kind,
        error,
        retries > 0 ? ` after ${retries} retr${retries === 1 ? 'y' : 'ies'}` : '',
      ),
    );
  }

  /** RelayOwner: the answer's first byte came, at `at` (`performance.now()` ms). */
  firstByte(at: number): void {
    this.trace?.firstByte(at);
  }

  /** RelayOwner: the relay wrote the response's end (or its in-band error). */
  relayEnded(status: number, outcome: RequestOutcome, usage: UsageCounts | undefined, error: string | undefined): void {
    if (this.over()) return;
    this.phase = 'ended';
    this.finished(status, outcome, usage, error);
  }

  // ---- the exchange's other ends ------------------------------------------------------------------

  /** --request-timeout passed: stop the upstream request and answer (504, or in-band mid-response). */
  private deadlinePassed(): void {
    this.deadline = undefined;
    if (this.over()) return;
    if (this.phase === 'queued') this.ctx.state.admission.cancel(this);
    const ms = this.ctx.options.requestTimeoutMs;
    const error = new ClientError(
      504,
      `the request did not finish within --request-timeout (${ms} ms)`,
      'request_timeout',
    );
    // Mid-response the relay answers in-band itself (and ends the exchange); before, we refuse.
    if (this.phase === 'attempting' && this.relay?.timeOut(error) === true) return;
    this.refuse(error);
  }

  /** Ends the response with an error before anything was sent. */
  private refuse(error: ClientError, closeConnection = false, headers: readonly string[] = []): void {
    if (this.over()) return;
    this.phase = 'ended';
    const extra = [REQUEST_ID, this.requestId, ...headers];
    // closeConnection: the body is unread; drained (bounded) after the answer, which a close
    // under the arriving bytes would lose to a reset.
    const format = this.dialect.errorFormat;
    if (closeConnection) sendClientErrorThenDrain(this.res, error, extra, format);
    else sendClientError(this.res, error, this.ctx.state.closing, extra, format);
    this.finished(error.status, 'error', undefined, `${error.code}: ${error.logMessage}`);
  }

  private clientAborted(): void {
    if (this.over()) return;
    const was = this.phase;
    this.phase = 'aborted';
    if (was === 'queued') this.ctx.state.admission.cancel(this);
    this.relay?.cancel();
    this.finished(499, 'client_abort', undefined, 'the client closed the connection');
  }

  /** A bug, not an input: the request fails with a 500, its ticket closed, the process lives. */
  private internalError(error: unknown): void {
    this.relay?.cancel();
    this.ctx.options.onWarning(`kvroute proxy: internal error: ${(error as Error)?.stack ?? String(error)}`);
    this.refuse(new ClientError(500, 'internal error in the proxy', 'upstream_error'));
  }

  // ---- observe: the one terminal point ----------------------------------------------------------

  /**
   * The exchange is over (run once, on entering `ended` or `aborted`): gives back what it held,
   * then tells the observers. `error` says what went wrong for every outcome but success.
   */
  private finished(status: number, outcome: RequestOutcome, usage?: UsageCounts, error?: string): void {
    const state = this.ctx.state;
    const slot = this.slot;
    this.slot = undefined;
    slot?.leave(this.flow.tenant, this.flow.inputTokens, this);
    this.flow.settled(outcome, this.relay?.outputTokens, this.parsed?.route.session);
    this.reader.release();
    if (this.deadline !== undefined) clearTimeout(this.deadline);
    state.exchangeEnded();
    const observers = this.ctx.observers;
    // One clock read for the trace's end and the metrics' end-to-end time (none when neither is kept).
    const endedAt = this.trace !== undefined || observers.any ? performance.now() : 0;
    this.trace?.end(status, outcome, usage, error, endedAt);
    if (observers.any) {
      const e2eMs = endedAt - this.t0;
      const model = this.parsed !== undefined && status !== 404 ? this.parsed.model : '';
      observers.onFinished(this.relay?.backend.id, status, e2eMs, usage, outcome, model);
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
    const relay = this.relay;
    const record: RequestRecord = {
      startedAt: performance.timeOrigin + this.t0,
      requestId: this.requestId,
      path: this.path,
      status,
      outcome,
      attempts: relay === undefined ? 0 : this.attempts + 1,
      e2eMs,
    };
    if (error !== undefined) record.error = error;
    if (this.parsed !== undefined) record.model = this.parsed.model;
    if (relay !== undefined) {
      record.instance = relay.backend.id;
      record.reason = relay.reason;
    }
    const session = this.parsed?.route.session ?? this.session;
    if (session !== '') record.session = String(session);
    if (this.parsed !== undefined) record.stream = this.parsed.stream;
    if (relay !== undefined && relay.ttftMs >= 0) record.ttftMs = relay.ttftMs;
    if (usage !== undefined) record.usage = usage;
    this.flow.annotate(record);
    const offload = relay?.offloadRecord;
    if (offload !== undefined) record.offload = offload;
    return record;
  }
}
