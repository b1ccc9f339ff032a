/**
 * One attempt of a completion request (proxy-exchange.ts makes one per router decision): it holds
 * the decision's router ticket and the backend's in-flight slot, sends the request to the
 * backend's pool (after an offload's prefill phase, offload/offload-attempt.ts, when the decision
 * is one), and relays the answer to the client. A retry is a new AttemptRelay; a finished one
 * ignores every late callback of its upstream request.
 *
 * The commit point. Nothing reaches the client before the answer's first body byte (or its end,
 * for an empty body). Before that point a failure (refused, reset, a timeout, even after a 200
 * head) goes back to the exchange, which retries or answers 502/504 (attemptFailed). After it:
 * a streaming (SSE) answer ends with `data: {"error":…}\n\n` + `data: [DONE]\n\n`; a
 * non-streaming one, still held, becomes a 502 JSON error (failMidResponse). Upstream 4xx/5xx
 * statuses pass through unchanged and are not retried.
 *
 * Relaying. A 2xx answer to a `stream: true` request is written through chunk by chunk (SSE
 * bytes untouched). Anything else (non-streaming JSON, error bodies) is held until complete and
 * sent with one end(), which gives it a Content-Length and lets usage be read from it; a held
 * body past HOLD_LIMIT switches to write-through. An offload's decode answer loses its
 * `kv_transfer_params` on the way (offload/offload-bodies.ts).
 *
 * Backpressure. When the client's write() returns false (uWS's buffer is over its limit) onData
 * returns false, which pauses the upstream socket's reads (and its body timeout); onWritable
 * resumes them. The client's slowness thus reaches the engine's TCP window, and the proxy buffers
 * at most one uWS backpressure limit plus one socket read per stream.
 *
 * Phases (`phase`), and the only legal moves:
 *
 *   sent ─onHeaders─▶ head ─onData─▶ holding ─(held bytes past HOLD_LIMIT)─▶ streaming
 *                          ├─onData─▶ received ─(first bytes written)─▶ streaming ⇄ paused
 *                          └─onData─▶ streaming                          (write false / onWritable)
 *   every phase ─onComplete, onError, cancel(), timeOut()─▶ done
 *
 * - sent: routed; the request is on its way (an offload's prefill may run first); no answer yet.
 * - head: status and headers arrived, no body byte yet; the answer streams (streams()) or is held.
 * - holding: body bytes arrived and are held for one end(); nothing is on the wire.
 * - received: a streamed answer's first bytes arrived but none was written yet (the
 *   transfer-params stripper holds back an incomplete event).
 * - streaming / paused: status and headers are on the wire (committed); paused = the client's
 *   buffer is full and the upstream is paused until onWritable.
 * - done: the ticket is settled; the relay never touches the response again.
 * "After the first byte" (no retry) is every phase from holding on.
 *
 * Ticket invariant: the router ticket and the backend's in-flight slot are held from the
 * constructor to settle(), which runs once whatever ends the attempt (complete, upstream error,
 * cancel() on client abort or an internal error, timeOut()); settle() also cancels a running
 * prefill (its own ticket and slot are the OffloadAttempt's).
 */
import type { Dispatcher } from 'undici';

import { sendJson } from '../server/client-response.js';
import type { ClientResponse } from '../server/client-io.js';
import { ClientError, statusLine } from '../server/error-body.js';
import { OffloadAttempt } from '../offload/offload-attempt.js';
import { SseTransferParamsStripper, withoutTransferParams } from '../offload/offload-bodies.js';
import type {
  ObserverList,
  OffloadRecord,
  RequestOutcome,
  UpstreamErrorKind,
  UsageCounts,
} from '../observe/proxy-observer.js';
import type { ResolvedProxyOptions } from '../proxy-options.js';
import type { ProxyState } from '../proxy-state.js';
import type { Backend } from '../upstream/backend.js';
import { REQUEST_ID, relayedResponseHeaders } from './forward-headers.js';
import { completionTokensIn, StreamedTokenCounter } from './output-tokens.js';
import { classifyUpstreamError, upstreamFailure } from './upstream-errors.js';
import { SseUsageScanner, usageIn } from './usage-scan.js';
import type { ApiDialect } from './api-dialect.js';

/** A held (non-streaming) body past this many bytes is written through instead. */
const HOLD_LIMIT = 8 * 2 ** 20;
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

export type RelayPhase = 'sent' | 'head' | 'holding' | 'received' | 'streaming' | 'paused' | 'done';

/**
 * What the answer does with `kv_transfer_params`: 'none' (the request carried none, or the answer
 * keeps its bytes); 'sent' (an offload's decode carried them; its head decides); 'strip' (a 2xx
 * answer without a content coding loses them: an SSE stream through `stripper`, a held body at
 * its end).
 */
type TransferParams = 'none' | 'sent' | 'strip';

/** The request every attempt of one exchange sends and answers (built once per exchange). */
export interface RelayedRequest {
  readonly res: ClientResponse;
  readonly state: ProxyState;
  readonly observers: ObserverList;
  readonly options: ResolvedProxyOptions;
  /** Path and query, as the client sent them (the backend's base path goes in front). */
  readonly path: string;
  /** The forwarded request headers (forward-headers.ts), x-request-id included. */
  readonly headers: string[];
  readonly requestId: string;
  readonly stream: boolean;
  /** Appended to x-kvroute-reason: `; keys=text (why)` when token keys fell back to text; else ''. */
  readonly keysNote: string;
  /** performance.now() at the request's arrival (time to first byte counts from it). */
  readonly t0: number;
  /** The called API's usage keys, token markers and error shapes (api-dialect.ts). */
  readonly dialect: ApiDialect;
}

/** The router's decision for this attempt, copied out of router.decision (valid until the next route()). */
export interface RoutedAttempt {
  ticket: number;
  backend: Backend;
  reason: string;
  predictedCachedTokens: number;
  /** offloadReason() of the decision ('' for a policy without the offload layer). */
  offloadNote: string;
  /** An offload's prefill ticket and instance; -1 / undefined when the request is served whole. */
  prefillTicket: number;
  prefillInstance: string | undefined;
}

/** How an attempt's end reaches its exchange. */
export interface RelayOwner {
  /** The answer (or its in-band error) is the exchange's last word: it is over. */
  relayEnded(status: number, outcome: RequestOutcome, usage: UsageCounts | undefined, error: string | undefined): void;
  /**
   * The attempt failed before any byte of its answer, so nothing was sent: retry (`retryable`)
   * or answer the failure. The ticket is settled and the breaker told already.
   */
  attemptFailed(backend: Backend, kind: UpstreamErrorKind, error: Error, retryable: boolean): void;
  /** A streamed answer's output tokens so far (flow control charges them to the tenant as they stream). */
  streamedTokens(total: number): void;
  /** The answer's first byte came, at `at` (`performance.now()` ms; the request's trace marks it). */
  firstByte(at: number): void;
}

export class AttemptRelay implements Dispatcher.DispatchHandlers {
  /** The backend the decision chose. */
  readonly backend: Backend;
  private phase: RelayPhase = 'sent';
  /** The decision's router ticket; -1 once settled. */
  private ticket: number;
  /** ms from arrival to the answer's first body byte; -1 before it. */
  private ttft = -1;
  /** The attempt's offload (its prefill phase, then the record), when its decision was one. */
  private offload: OffloadAttempt | undefined;
  private transferParams: TransferParams = 'none';
  /** When the decode request left (an offload with params): the transfer's time counts from it. */
  private decodeSentAt = 0;
  private stripper: SseTransferParamsStripper | undefined;
  private abortUpstream: ((error?: Error) => void) | undefined;
  private resumeUpstream: (() => void) | undefined;
  private status = 0;
  private statusText = '';
  private responseHeaders: string[] = [];
  private held: Buffer[] = [];
  private heldBytes = 0;
  private sse: SseUsageScanner | undefined;
  /** A streamed 2xx answer's output tokens, for the learned decode cost (proxy-costs.ts). */
  private tokens: StreamedTokenCounter | undefined;
  /** A held 2xx answer's usage.completion_tokens, read at its end. */
  private heldTokens: number | undefined;

  /** Takes the decision's ticket and the backend's in-flight slot. */
  constructor(
    private readonly owner: RelayOwner,
    private readonly request: RelayedRequest,
    private readonly routed: RoutedAttempt,
  ) {
    this.ticket = routed.ticket;
    this.backend = routed.backend;
    this.backend.inFlight++;
  }

  /** The decision's reason (x-kvroute-reason without its notes). */
  get reason(): string {
    return this.routed.reason;
  }

  /** ms from arrival to the answer's first body byte; -1 before it. */
  get ttftMs(): number {
    return this.ttft;
  }

  /** What the request log records of the attempt's offload, when its decision was one. */
  get offloadRecord(): OffloadRecord | undefined {
    return this.offload?.record;
  }

  /** Sends `body`, after a prefill phase when the decision is an offload. */
  start(body: Buffer): void {
    const { prefillTicket, prefillInstance } = this.routed;
    if (prefillTicket < 0 || prefillInstance === undefined) {
      this.send(body, false);
      return;
    }
    const { state, observers, options, path, headers } = this.request;
    const context = { state, observers, timeoutMs: options.offloadPrefillTimeoutMs };
    this.offload = new OffloadAttempt(context, this.backend, prefillInstance, prefillTicket);
    this.offload.start(body, path, headers, (decode, withParams) => this.send(decode, withParams));
  }

  /** The client left, or the exchange failed: stop the upstream request, settle the ticket. */
  cancel(): void {
    if (this.phase === 'done') return;
    this.phase = 'done';
    // Aborting runs onError synchronously, which finds the relay done; settle() is idempotent.
    this.abortUpstream?.();
    this.settle(false);
  }

  /**
   * --request-timeout passed: stops the upstream request. After the answer's first byte the
   * relay answers in-band itself (true); before it, the exchange answers (false).
   */
  timeOut(error: ClientError): boolean {
    const was = this.phase;
    this.cancel();
    if (was === 'sent' || was === 'head' || was === 'done') return false;
    this.failMidResponse(error, was);
    return true;
  }

  /**
   * Sends the attempt's request to its backend: the client's body, or an offload's decode body
   * (`withParams`: with the prefill's kv_transfer_params, which its answer then loses).
   */
  private send(body: Buffer, withParams: boolean): void {
    if (withParams) {
      this.transferParams = 'sent';
      this.decodeSentAt = performance.now();
    }
    const backend = this.backend;
    const { path, headers } = this.request;
    backend.upstream.dispatch({ path: backend.basePath + path, method: 'POST', headers, body }, this);
  }

  /**
   * Closes the attempt's ticket and in-flight slot, and a running prefill's (idempotent). The
   * learned costs observe only a whole 2xx answer (proxy-costs.ts).
   */
  private settle(completed: boolean): void {
    this.offload?.cancel();
    if (this.ticket < 0) return;
    const ticket = this.ticket;
    this.ticket = -1;
    this.backend.inFlight--;
    const { router, costs } = this.request.state;
    if (completed) router.complete(ticket);
    else router.abort(ticket);
    const success = completed && this.status >= 200 && this.status < 300;
    costs.ended(ticket, success, this.tokens?.tokens ?? this.heldTokens);
  }

  /** The answer's output tokens as counted so far (streamed chunks, or a held body's usage); undefined: unknown. */
  get outputTokens(): number | undefined {
    return this.tokens?.tokens ?? this.heldTokens;
  }

  /** A 2xx answer to a streaming request is written through; anything else is held. */
  private streams(): boolean {
    return this.request.stream && this.status >= 200 && this.status < 300;
  }

  /** The body is still held for one end(): held bytes, or a head whose answer does not stream. */
  private holdsBody(): boolean {
    return this.phase === 'holding' || ((this.phase === 'sent' || this.phase === 'head') && !this.streams());
  }

  // ---- undici DispatchHandlers (the h1 pool calls the same) --------------------------------------

  onConnect(abort: (error?: Error) => void): void {
    this.abortUpstream = abort;
    if (this.phase === 'done') abort();
  }

  /** The response head: its fields as Buffers (undici) or latin1 strings (the h1 client). */
  onHeaders(
    statusCode: number,
    rawHeaders: readonly (Buffer | string)[],
    resume: () => void,
    statusText: string,
  ): boolean {
    if (statusCode < 200) return true; // 1xx: informational, the real head follows
    if (this.phase === 'done') return true;
    this.status = statusCode;
    this.statusText = statusText;
    this.resumeUpstream = resume;
    this.responseHeaders = relayedResponseHeaders(rawHeaders);
    this.phase = 'head';
    const streams = this.streams();
    const dialect = this.request.dialect;
    if (streams && this.request.observers.any) this.sse = new SseUsageScanner(dialect.usage);
    if (streams) this.tokens = new StreamedTokenCounter(dialect.streamedToken, dialect.completion);
    // An offload's decode: its answer may carry kv_transfer_params (not in a coded body, left alone).
    if (this.transferParams === 'sent')
      this.transferParams = statusCode < 300 && !hasCoding(this.responseHeaders) ? 'strip' : 'none';
    if (this.transferParams === 'strip' && streams) this.stripper = new SseTransferParamsStripper();
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.phase === 'done') return true;
    if (this.phase === 'sent' || this.phase === 'head') this.firstByte();
    if (this.stripper !== undefined) {
      chunk = this.stripper.feed(chunk);
      if (chunk.length === 0) return true;
    }
    if (this.phase === 'holding') {
      this.held.push(chunk);
      this.heldBytes += chunk.length;
      if (this.heldBytes <= HOLD_LIMIT) return true;
      // Too big to hold: write through from here on.
      chunk = Buffer.concat(this.held);
      this.held = [];
    }
    this.sse?.feed(chunk);
    if (this.tokens !== undefined) {
      this.tokens.feed(chunk);
      this.owner.streamedTokens(this.tokens.tokens);
    }
    let ok = true;
    const res = this.request.res;
    res.cork(() => {
      if (this.phase !== 'streaming' && this.phase !== 'paused') this.commit(true);
      ok = res.write(chunk);
    });
    if (ok) return true;
    this.phase = 'paused';
    return false;
  }

  onComplete(): void {
    if (this.phase === 'done') return;
    const { res, state, observers } = this.request;
    if (this.phase === 'sent' || this.phase === 'head') {
      state.router.onFirstToken(this.ticket);
      state.costs.firstToken(this.ticket);
    }
    const status = this.status;
    let usage = this.sse?.usage;
    const close = state.closing;
    if (this.holdsBody()) {
      let body = this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held);
      this.held = [];
      if (this.transferParams === 'strip') body = withoutTransferParams(body);
      const { dialect } = this.request;
      if (observers.any && status < 300) usage = usageIn(body, 0, body.length, dialect.usage);
      if (status >= 200 && status < 300) this.heldTokens = completionTokensIn(body, dialect.completion);
      res.cork(() => {
        this.commit(false);
        res.end(body, close);
      });
    } else {
      // Streamed: a closing proxy's `connection: close` went out with the head (commit()); uWS
      // must not be asked to add it at end(), which would land inside the chunked body.
      const rest = this.stripper?.flush();
      if (rest !== undefined) {
        this.sse?.feed(rest);
        this.tokens?.feed(rest);
      }
      res.cork(() => {
        if (this.phase !== 'streaming' && this.phase !== 'paused') this.commit(true);
        if (rest !== undefined) res.write(rest);
        res.end();
      });
    }
    this.phase = 'done';
    this.settle(true);
    const ok = status < 400;
    this.owner.relayEnded(status, ok ? 'success' : 'error', usage, ok ? undefined : `engine answered ${status}`);
  }

  onError(error: Error): void {
    if (this.phase === 'done') {
      this.settle(false);
      return;
    }
    const was = this.phase;
    this.phase = 'done';
    const { state, observers } = this.request;
    const backend = this.backend;
    const { kind, trips } = classifyUpstreamError(error);
    const afterFirstByte = was !== 'sent' && was !== 'head';
    if (observers.any) observers.onUpstreamError(backend.id, kind, afterFirstByte);
    this.settle(false);
    if (!afterFirstByte) {
      if (trips) state.reportFailure(backend, `${kind}: ${error.message}`);
      const code = (error as { code?: string }).code;
      const retryable = trips || code === 'UND_ERR_CLOSED' || code === 'UND_ERR_DESTROYED';
      this.owner.attemptFailed(backend, kind, error, retryable);
      return;
    }
    this.failMidResponse(upstreamFailure(502, 'upstream_interrupted', backend.id, 'mid-response', kind, error), was);
  }

  /** The answer's first body byte: the router's first token, the time to first byte. */
  private firstByte(): void {
    const { state, observers, t0 } = this.request;
    this.phase = this.streams() ? 'received' : 'holding';
    state.router.onFirstToken(this.ticket);
    state.costs.firstToken(this.ticket);
    const at = performance.now();
    this.ttft = at - t0;
    this.owner.firstByte(at);
    if (observers.any) {
      observers.onFirstByte(this.backend.id, this.ttft);
      if (this.stripper !== undefined)
        observers.onOffloadTransfer(this.backend.id, state.policyName, performance.now() - this.decodeSentAt);
    }
  }

  /**
   * The answer was under way (`was`, the phase it had reached) when it failed (the engine, or the
   * deadline): say so in-band, never truncate silently. A held (non-streaming) body was not sent
   * yet, so it becomes a clean error status instead.
   */
  private failMidResponse(error: ClientError, was: RelayPhase): void {
    const what = `${error.code}: ${error.logMessage}`;
    const { res, state, stream, requestId, dialect } = this.request;
    if (was !== 'streaming' && was !== 'paused') {
      this.held = [];
      sendJson(res, error.status, error.body(dialect.errorFormat), [REQUEST_ID, requestId], state.closing);
      this.owner.relayEnded(error.status, 'error', undefined, what);
      return;
    }
    // The exchange ends before the writes: uWS's close() runs the client's onAborted at once,
    // which must find the exchange over (an interrupted answer, not a client abort).
    this.owner.relayEnded(this.status, 'interrupted', undefined, what);
    if (stream && this.status < 300) {
      const events = dialect.streamError(error);
      res.cork(() => res.end(events));
    } else {
      // A written-through non-SSE body cannot carry an error: cut the connection so the
      // client sees an incomplete chunked response, not a silently short one.
      res.close();
    }
  }

  /** Writes status and headers (inside a cork); `streamed`: the body follows in writes, not one end(). */
  private commit(streamed: boolean): void {
    const { res, state, keysNote, requestId } = this.request;
    res.writeStatus(statusLine(this.status, this.statusText));
    const h = this.responseHeaders;
    for (let i = 0; i + 1 < h.length; i += 2) res.writeHeader(h[i]!, h[i + 1]!);
    // A streamed response's head goes out before its end(…, close) could add it.
    if (streamed && state.closing) res.writeHeader('connection', 'close');
    res.writeHeader(INSTANCE_HEADER, this.backend.idBytes);
    const { reason, offloadNote, predictedCachedTokens } = this.routed;
    // An offload note carries costs in ms: per request, so not cached.
    if (offloadNote !== '') res.writeHeader(REASON_HEADER, reason + offloadNote + keysNote);
    else res.writeHeader(REASON_HEADER, reasonBytes(keysNote === '' ? reason : reason + keysNote));
    res.writeHeader(PREDICTED_HEADER, String(predictedCachedTokens));
    // An engine that echoes the id (vLLM --enable-request-id-headers) already sent it.
    if (!hasHeader(h, REQUEST_ID)) res.writeHeader(REQUEST_ID, requestId);
    if (!streamed) return;
    this.phase = 'streaming';
    res.onWritable(() => this.writable());
  }

  private writable(): boolean {
    if (this.phase === 'paused') {
      this.phase = 'streaming';
      this.resumeUpstream?.();
    }
    return true;
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
