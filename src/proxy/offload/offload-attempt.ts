/**
 * One offloaded attempt of a request (docs/proxy.md "Prefill offload"), between the router's
 * decision and the decode request: runs the prefill phase (a PrefillCall, offload-prefill.ts) on
 * the prefill instance while the attempt's relay (exchange/attempt-relay.ts) holds the decode
 * instance's ticket, then hands the relay the decode body: the client's plus the prefill's
 * `kv_transfer_params`, or, when the prefill failed or timed out, the client's own (co-located
 * serving, counted as a fallback).
 *
 * It owns the prefill side's bookkeeping: the prefill ticket (onFirstToken + complete when the
 * prefill answered with params, abort otherwise), the prefill instance's in-flight count, its
 * breaker on a connection failure (as any attempt's), the observers' onOffload and
 * onUpstreamError, and the request record's offload fields.
 *
 * Invariant: the prefill ticket and in-flight slot are held exactly while `call` is set (the
 * prefill phase runs); the phase ends once, by its outcome (then `send` runs, exactly once) or by
 * cancel() (then it never does).
 */
import type { Backend } from '../upstream/backend.js';
import { OffloadBodies } from './offload-bodies.js';
import { PrefillCall, prefillHeaders, type PrefillOutcome } from './offload-prefill.js';
import type { ObserverList, OffloadFallback, OffloadRecord } from '../observe/proxy-observer.js';
import type { ProxyState } from '../proxy-state.js';
import { classifyUpstreamError } from '../exchange/upstream-errors.js';

export interface OffloadContext {
  state: ProxyState;
  observers: ObserverList;
  /** --offload-prefill-timeout (0: none). */
  timeoutMs: number;
}

/** Sends the decode request; `withParams`: the body carries transferred KV's params. */
export type SendDecode = (body: Buffer, withParams: boolean) => void;

export class OffloadAttempt {
  /** What the request log records of it. */
  readonly record: OffloadRecord;
  private call: PrefillCall | undefined;
  /** The prefill instance, while its in-flight slot is held. */
  private prefill: Backend | undefined;

  constructor(
    private readonly ctx: OffloadContext,
    /** The decode instance (the decision's). */
    private readonly decode: Backend,
    prefillInstance: string,
    private readonly ticket: number,
  ) {
    this.record = { prefillInstance };
  }

  /**
   * Starts the prefill of `body` (the client's, as it is forwarded) at `path` with `headers`; the
   * decode request follows through `send`, possibly before this returns.
   */
  start(body: Buffer, path: string, headers: readonly string[], send: SendDecode): void {
    const { state } = this.ctx;
    const prefill = state.backend(this.record.prefillInstance);
    const bodies = prefill === undefined ? undefined : OffloadBodies.of(body);
    if (prefill === undefined || bodies === undefined) {
      // Removed between two events (cannot happen in one synchronous turn), or not an object.
      state.router.abort(this.ticket);
      this.fellBack(0, 'error');
      send(body, false);
      return;
    }
    prefill.inFlight++;
    this.prefill = prefill;
    const call = new PrefillCall(prefill, (outcome) => this.ended(prefill, call, outcome, bodies, body, send));
    this.call = call;
    call.start({
      path,
      headers: prefillHeaders(headers),
      body: bodies.prefill(),
      timeoutMs: this.ctx.timeoutMs,
    });
  }

  /** The attempt ends during the prefill (client abort, deadline, a bug): abort its upstream and ticket. */
  cancel(): void {
    const call = this.call;
    if (call === undefined) return;
    this.call = undefined;
    call.cancel();
    this.release(false);
  }

  private ended(
    prefill: Backend,
    call: PrefillCall,
    outcome: PrefillOutcome,
    bodies: OffloadBodies,
    body: Buffer,
    send: SendDecode,
  ): void {
    this.call = undefined;
    const ms = performance.now() - call.startedAt;
    const { state, observers } = this.ctx;
    if (outcome.ok) {
      this.release(true);
      this.record.prefillMs = ms;
      if (observers.any) observers.onOffload(prefill.id, this.decode.id, state.policyName, ms, undefined);
      send(bodies.decode(outcome.params), true);
      return;
    }
    this.release(false);
    if (outcome.error !== undefined) {
      const { kind, trips } = classifyUpstreamError(outcome.error);
      if (observers.any) observers.onUpstreamError(prefill.id, kind, false);
      if (trips) state.reportFailure(prefill, `${kind}: ${outcome.error.message}`);
    }
    this.fellBack(ms, outcome.cause);
    send(body, false);
  }

  /** Closes the prefill ticket and gives back the prefill instance's in-flight slot. */
  private release(completed: boolean): void {
    this.prefill!.inFlight--;
    this.prefill = undefined;
    const router = this.ctx.state.router;
    if (completed) {
      router.onFirstToken(this.ticket);
      router.complete(this.ticket);
    } else router.abort(this.ticket);
  }

  /** Records and reports a fallback to co-located serving on the decode instance. */
  private fellBack(ms: number, cause: OffloadFallback): void {
    this.record.prefillMs = ms;
    this.record.fallback = cause;
    const { state, observers } = this.ctx;
    if (observers.any) observers.onOffload(this.record.prefillInstance, this.decode.id, state.policyName, ms, cause);
  }
}
