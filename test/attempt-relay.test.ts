/**
 * AttemptRelay (src/proxy/exchange/attempt-relay.ts) on its own, against a recording client
 * response, a recording router and a backend whose pool only captures the handler: the phases'
 * edges that the end-to-end proxy tests reach only by timing. A failure before the first byte goes
 * back to the exchange with nothing written; after it the relay answers in-band; a cancelled relay
 * aborts a late onConnect and ignores late callbacks; the deadline mid-stream ends the exchange
 * before uWS's close() could report a client abort.
 */
import { apiDialect } from '../src/proxy/exchange/api-dialect.js';
import { describe, expect, it } from 'vitest';

import {
  AttemptRelay,
  type RelayedRequest,
  type RelayOwner,
  type RoutedAttempt,
} from '../src/proxy/exchange/attempt-relay.js';
import { ObserverList } from '../src/proxy/observe/proxy-observer.js';
import type { ResolvedProxyOptions } from '../src/proxy/proxy-options.js';
import type { ProxyState } from '../src/proxy/proxy-state.js';
import type { ClientResponse } from '../src/proxy/server/client-io.js';
import { ClientError } from '../src/proxy/server/error-body.js';
import type { Backend } from '../src/proxy/upstream/backend.js';

/** A client response that records what reaches the wire. */
class WireResponse implements ClientResponse {
  readonly wire: string[] = [];
  onAbortedHandler: (() => void) | undefined;
  writeOk = true;
  onAborted(handler: () => void): this {
    this.onAbortedHandler = handler;
    return this;
  }
  onData(): this {
    return this;
  }
  cork(callback: () => void): this {
    callback();
    return this;
  }
  writeStatus(status: string): this {
    this.wire.push(`status ${status}`);
    return this;
  }
  writeHeader(): this {
    return this;
  }
  write(chunk: string | Buffer): boolean {
    this.wire.push(`write ${String(chunk)}`);
    return this.writeOk;
  }
  onWritable(): this {
    return this;
  }
  end(body?: string | Buffer): this {
    this.wire.push(`end ${body === undefined ? '' : String(body)}`);
    return this;
  }
  close(): this {
    this.wire.push('close');
    this.onAbortedHandler?.(); // as uWS: close() runs onAborted at once
    return this;
  }
}

function rig(stream = true) {
  const router: string[] = [];
  const res = new WireResponse();
  const handlers: AttemptRelay[] = [];
  const backend = {
    id: 'http://e1',
    idBytes: Buffer.from('http://e1'),
    basePath: '',
    inFlight: 0,
    upstream: { dispatch: (_opts: unknown, handler: AttemptRelay) => void handlers.push(handler) },
  } as unknown as Backend;
  const state = {
    closing: false,
    policyName: 'min_ttft',
    reportFailure: (b: Backend, why: string) => router.push(`breaker ${b.id} ${why}`),
    router: {
      onFirstToken: (t: number) => router.push(`first ${t}`),
      complete: (t: number) => router.push(`complete ${t}`),
      abort: (t: number) => router.push(`abort ${t}`),
    },
    // The learned costs' feed (proxy-costs.ts): what it observes is test/proxy-costs.test.ts's.
    costs: { firstToken: () => {}, ended: () => {} },
  } as unknown as ProxyState;
  const request: RelayedRequest = {
    res,
    state,
    observers: new ObserverList([], () => {}),
    options: { offloadPrefillTimeoutMs: 0 } as ResolvedProxyOptions,
    path: '/v1/chat/completions',
    headers: [],
    requestId: 'r1',
    dialect: apiDialect('chat'),
    stream,
    keysNote: '',
    t0: performance.now(),
  };
  const ends: string[] = [];
  const owner: RelayOwner = {
    relayEnded: (status, outcome) => void ends.push(`${status} ${outcome} (wire: ${res.wire.length})`),
    attemptFailed: (b, kind, _error, retryable) => void ends.push(`failed ${b.id} ${kind} retryable=${retryable}`),
    streamedTokens: () => {},
    firstByte: () => {},
  };
  const routed: RoutedAttempt = {
    ticket: 7,
    backend,
    reason: 'cache_hit',
    predictedCachedTokens: 0,
    offloadNote: '',
    prefillTicket: -1,
    prefillInstance: undefined,
  };
  const relay = new AttemptRelay(owner, request, routed);
  relay.start(Buffer.from('{}'));
  return { relay, res, router, ends, backend, handlers };
}

const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });

describe('AttemptRelay', () => {
  it('a failure after a 200 head but before any body byte goes back to the exchange, nothing written', () => {
    const { relay, res, router, ends, backend, handlers } = rig();
    expect(handlers).toEqual([relay]);
    expect(backend.inFlight).toBe(1);
    relay.onHeaders(200, [], () => {}, 'OK');
    relay.onError(reset);
    expect(res.wire).toEqual([]);
    expect(ends).toEqual(['failed http://e1 reset retryable=true']);
    expect(router).toEqual(['abort 7', 'breaker http://e1 reset: read ECONNRESET']);
    expect(backend.inFlight).toBe(0);
    relay.onData(Buffer.from('late')); // a late callback of the failed attempt
    relay.onComplete();
    expect(res.wire).toEqual([]);
  });

  it('after the first byte a failure is answered in-band: SSE error, then [DONE]', () => {
    const { relay, res, router, ends } = rig();
    relay.onHeaders(200, [], () => {}, 'OK');
    relay.onData(Buffer.from('data: 1\n\n'));
    relay.onError(reset);
    expect(res.wire[0]).toBe('status 200 OK');
    expect(res.wire.slice(1, 2)).toEqual(['write data: 1\n\n']);
    expect(res.wire[2]).toMatch(/^end data: \{"error":.*upstream_interrupted.*\n\ndata: \[DONE\]\n\n$/s);
    expect(ends).toEqual(['200 interrupted (wire: 2)']);
    expect(router).toEqual(['first 7', 'abort 7']);
  });

  it('a held (non-streaming) answer is one end() with the whole body', () => {
    const { relay, res, router, ends } = rig(false);
    relay.onHeaders(200, [], () => {}, 'OK');
    relay.onData(Buffer.from('{"a":'));
    relay.onData(Buffer.from('1}'));
    expect(res.wire).toEqual([]);
    relay.onComplete();
    expect(res.wire).toEqual(['status 200 OK', 'end {"a":1}']);
    expect(ends).toEqual(['200 success (wire: 2)']);
    expect(router).toEqual(['first 7', 'complete 7']);
  });

  it('cancelled before its socket: a late onConnect aborts at once, the ticket is aborted once', () => {
    const { relay, router, backend } = rig();
    relay.cancel();
    relay.cancel();
    let aborted = 0;
    relay.onConnect(() => aborted++);
    expect(aborted).toBe(1);
    relay.onError(new Error('aborted'));
    expect(router).toEqual(['abort 7']);
    expect(backend.inFlight).toBe(0);
  });

  it('the deadline mid-stream of a non-SSE body cuts the connection after ending the exchange', () => {
    const { relay, res, ends } = rig(false);
    relay.onHeaders(200, [], () => {}, 'OK');
    relay.onData(Buffer.alloc(9 * 2 ** 20, 'x')); // past the hold limit: written through
    let abortedAfterEnd = false;
    res.onAborted(() => (abortedAfterEnd = ends.length === 1));
    expect(relay.timeOut(new ClientError(504, 'too slow', 'request_timeout'))).toBe(true);
    expect(res.wire.at(-1)).toBe('close');
    expect(ends).toEqual(['200 interrupted (wire: 2)']);
    expect(abortedAfterEnd).toBe(true);
  });

  it('the deadline before the first byte leaves the answer to the exchange', () => {
    const { relay, res, router } = rig();
    relay.onHeaders(200, [], () => {}, 'OK');
    expect(relay.timeOut(new ClientError(504, 'too slow', 'request_timeout'))).toBe(false);
    expect(res.wire).toEqual([]);
    expect(router).toEqual(['abort 7']);
  });
});
