/**
 * Server-sent events to any number of dashboard pages over uWebSockets.js: one subscriber per
 * open GET /dashboard/events, each written the same pre-serialised frame.
 *
 * uWS rules kept here (its index.d.ts is the contract):
 * - onAborted is registered inside the request handler, before it returns; after an abort the
 *   response is never touched again (the subscriber is marked and dropped in the callback).
 * - Writes made outside the handler (every broadcast, close) are wrapped in cork().
 * - Backpressure: a write that returns false has been buffered by uWS. While a subscriber is
 *   backed up it gets no further frames (a stale frame is worthless on a live page); onWritable
 *   clears the flag. A subscriber still backed up after MAX_SKIPPED frames is closed, so a
 *   stuck reader costs at most one frame of buffer and a few seconds, never unbounded memory.
 *   The browser's EventSource reconnects by itself (after RETRY_MS).
 *
 * Cost: broadcast() is one cork + one write per subscriber; the frame string is shared.
 */
import type { ClientResponse } from '../../server/client-io.js';

/** Frames a backed-up subscriber may miss in a row before it is closed. */
export const MAX_SKIPPED = 5;
/** The reconnect delay EventSource is told to use after a drop, ms. */
const RETRY_MS = 1000;

interface Subscriber {
  readonly res: ClientResponse;
  /** Set by onAborted or by our own close/end: the response must not be touched. */
  gone: boolean;
  backedUp: boolean;
  skipped: number;
}

export class SseHub {
  private readonly subscribers = new Set<Subscriber>();

  /**
   * @param onCountChange hears the subscriber count after every change (the sampler starts on
   *   the first subscriber and stops after the last).
   */
  constructor(private readonly onCountChange: (count: number) => void) {}

  get size(): number {
    return this.subscribers.size;
  }

  /**
   * Takes over a response, inside its request handler (so uWS has it corked). `first` is
   * written at once, so a new page shows numbers without waiting for the next tick.
   */
  subscribe(res: ClientResponse, first: string | undefined): void {
    const sub: Subscriber = { res, gone: false, backedUp: false, skipped: 0 };
    res.onAborted(() => {
      sub.gone = true;
      this.drop(sub);
    });
    res.onWritable(() => {
      sub.backedUp = false;
      sub.skipped = 0;
      return true; // nothing to retry: uWS already buffered the write that backed up
    });
    res
      .writeStatus('200 OK')
      .writeHeader('content-type', 'text/event-stream; charset=utf-8')
      .writeHeader('cache-control', 'no-store')
      .writeHeader('x-content-type-options', 'nosniff');
    const ok = res.write(`retry: ${RETRY_MS}\n\n${first === undefined ? '' : event(first)}`);
    if (!ok) sub.backedUp = true;
    this.subscribers.add(sub);
    this.onCountChange(this.subscribers.size);
  }

  /** Writes one JSON frame to every subscriber that keeps up. */
  broadcast(json: string): void {
    const text = event(json);
    for (const sub of this.subscribers) {
      if (sub.gone) continue;
      if (sub.backedUp) {
        if (++sub.skipped > MAX_SKIPPED) {
          sub.gone = true;
          this.drop(sub);
          sub.res.close(); // runs onAborted, which finds it gone already
        }
        continue;
      }
      let ok = true;
      sub.res.cork(() => {
        ok = sub.res.write(text);
      });
      if (!ok) sub.backedUp = true;
    }
  }

  /** Ends every stream (the page's EventSource will try to reconnect). */
  close(): void {
    for (const sub of this.subscribers) {
      if (sub.gone) continue;
      sub.gone = true;
      sub.res.cork(() => {
        sub.res.end();
      });
    }
    this.subscribers.clear();
    this.onCountChange(0);
  }

  private drop(sub: Subscriber): void {
    if (this.subscribers.delete(sub)) this.onCountChange(this.subscribers.size);
  }
}

/** One SSE `message` event; the JSON has no raw newlines, so one data line suffices. */
function event(json: string): string {
  return `data: ${json}\n\n`;
}
