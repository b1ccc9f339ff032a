/**
 * The prefill phase of an offloaded request (docs/proxy.md "Prefill offload"): one POST of the
 * prefill body (offload-bodies.ts) to the prefill instance's pool, its JSON answer read whole,
 * and one outcome: the `kv_transfer_params` to send the decode instance, or why there are none
 * (the exchange then serves the request co-located on the decode instance).
 *
 * This is the unit the proxy's attempt relay drives (exchange/attempt-relay.ts, through
 * offload-attempt.ts) and the tests exercise against a protocol-speaking engine; it knows no
 * router and no client. Router tickets, in-flight counts,
 * the breaker and the observers are the attempt's.
 *
 * Outcomes, exactly one per call unless cancel() came first (then none):
 *   ok        2xx with a non-empty `kv_transfer_params` object
 *   error     the connection failed (refused, reset, the pool's timeouts); `error` is undici's
 *   status    a non-2xx answer
 *   timeout   `timeoutMs` passed first (the upstream request is aborted)
 *   params    2xx without usable params (missing, null, not an object, an unreadable body,
 *             or an answer over ANSWER_LIMIT)
 *
 * cancel() (the client left, the request deadline passed) aborts the upstream request, so the
 * prefill instance stops working on it; no outcome follows.
 */
import type { Dispatcher } from 'undici';

import type { Backend } from '../upstream/backend.js';
import { transferParamsOf } from './offload-bodies.js';
import type { OffloadFallback } from '../observe/proxy-observer.js';

export type PrefillOutcome =
  { ok: true; params: string } | { ok: false; cause: OffloadFallback; detail: string; error?: Error };

/** A prefill answer longer than this is not read: its params are not worth a bigger buffer. */
const ANSWER_LIMIT = 8 * 2 ** 20;

export interface PrefillRequest {
  /** Path and query as the client sent them; the backend's base path is prepended. */
  path: string;
  /** Flat [name, value, …], as for the decode request. */
  headers: string[];
  body: Buffer;
  /** 0: none (the pool's own timeouts still apply). */
  timeoutMs: number;
}

/** The request headers of the prefill: the client's, minus accept-encoding (the proxy reads the answer). */
export function prefillHeaders(headers: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < headers.length; i += 2)
    if (headers[i] !== 'accept-encoding') out.push(headers[i]!, headers[i + 1]!);
  return out;
}

export class PrefillCall implements Dispatcher.DispatchHandlers {
  /** performance.now() at start(). */
  startedAt = 0;
  private settled = false;
  private abortUpstream: ((error?: Error) => void) | undefined;
  private timer: NodeJS.Timeout | undefined;
  private status = 0;
  private encoded = false;
  private held: Buffer[] = [];
  private heldBytes = 0;

  constructor(
    private readonly backend: Backend,
    private readonly done: (outcome: PrefillOutcome) => void,
  ) {}

  /** Sends the prefill request. `done` may run before this returns (a pool that fails at once). */
  start(request: PrefillRequest): void {
    this.startedAt = performance.now();
    if (request.timeoutMs > 0) this.timer = setTimeout(() => this.timedOut(request.timeoutMs), request.timeoutMs);
    this.backend.upstream.dispatch(
      { path: this.backend.basePath + request.path, method: 'POST', headers: request.headers, body: request.body },
      this,
    );
  }

  /** Stops the prefill: aborts its upstream request; `done` is not called. */
  cancel(): void {
    if (this.settled) return;
    this.settled = true;
    this.release();
    this.abortUpstream?.();
  }

  // ---- undici DispatchHandlers (the h1 pool keeps the same contract) ----------------------------

  onConnect(abort: (error?: Error) => void): void {
    this.abortUpstream = abort;
    if (this.settled) abort();
  }

  onHeaders(statusCode: number, rawHeaders: readonly (Buffer | string)[]): boolean {
    if (statusCode < 200) return true;
    this.status = statusCode;
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
      if (String(rawHeaders[i]).toLowerCase() !== 'content-encoding') continue;
      const coding = String(rawHeaders[i + 1])
        .trim()
        .toLowerCase();
      this.encoded = coding !== '' && coding !== 'identity';
    }
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.settled) return true;
    this.heldBytes += chunk.length;
    if (this.heldBytes > ANSWER_LIMIT && this.status >= 200 && this.status < 300) {
      this.finish({ ok: false, cause: 'params', detail: `the answer is over ${ANSWER_LIMIT} bytes` }, true);
      return true;
    }
    if (this.heldBytes <= ANSWER_LIMIT) this.held.push(chunk);
    return true;
  }

  onComplete(): void {
    if (this.settled) return;
    const status = this.status;
    if (status < 200 || status >= 300) {
      this.finish({ ok: false, cause: 'status', detail: `the prefill instance answered ${status}` });
      return;
    }
    const answer = this.held.length === 1 ? this.held[0]! : Buffer.concat(this.held);
    const params = this.encoded ? undefined : transferParamsOf(answer);
    this.finish(
      params === undefined
        ? { ok: false, cause: 'params', detail: 'the prefill answer has no kv_transfer_params object' }
        : { ok: true, params },
    );
  }

  onError(error: Error): void {
    if (this.settled) return;
    this.finish({ ok: false, cause: 'error', detail: error.message, error });
  }

  // ---- ends -------------------------------------------------------------------------------------

  private timedOut(ms: number): void {
    this.timer = undefined;
    if (this.settled) return;
    this.finish({ ok: false, cause: 'timeout', detail: `no prefill answer within ${ms} ms` }, true);
  }

  private finish(outcome: PrefillOutcome, abort = false): void {
    this.settled = true;
    this.release();
    // The abort's onError comes back here synchronously and is ignored (settled).
    if (abort) this.abortUpstream?.();
    this.done(outcome);
  }

  private release(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.held = [];
  }
}
