/**
 * The relay's way into JetStream: each message published with the engine's seq (or a reset
 * marker) in headers, acknowledgements awaited in the background with at most `window` of them
 * outstanding, so the relay pipelines instead of waiting a round trip per message.
 *
 * Invariants:
 * - publish() never throws and never waits; a message NATS does not acknowledge (a timeout, NATS
 *   down, the stream refusing it) is reported through onFailed(subject), which makes that engine's
 *   next message a reset marker: the replicas rebuild rather than miss events silently;
 * - ready() is undefined while under the window, else a promise resolved once under it again: the
 *   receive loop awaits it, so a stalled NATS backs up into ZeroMQ (whose loss the seq check
 *   sees) instead of into this process's memory;
 * - messages of one subject reach the server in publish order (one connection, sent in order).
 */
import { headers as natsHeaders } from '@nats-io/transport-node';
import type { JetStreamClient } from '@nats-io/jetstream';

import { ENGINE_HEADER, RESET_HEADER, SEQ_HEADER, type ResetReason } from './event-subjects.js';
import type { EventPublisher } from './engine-relay.js';

export interface JetStreamPublisherOptions {
  /** Unacknowledged messages allowed in flight. Default 2048. */
  window?: number;
  /** A publish not acknowledged by then failed, ms. Default 5000. */
  timeoutMs?: number;
  onFailed(subject: string, error: Error): void;
}

const EMPTY: Uint8Array = new Uint8Array(0);

export class JetStreamPublisher implements EventPublisher {
  private outstanding = 0;
  private waiter: { promise: Promise<void>; resolve: () => void } | undefined;
  private readonly window: number;
  private readonly timeoutMs: number;
  failed = 0;
  acknowledged = 0;

  constructor(
    private readonly js: JetStreamClient,
    private readonly options: JetStreamPublisherOptions,
  ) {
    this.window = options.window ?? 2048;
    this.timeoutMs = options.timeoutMs ?? 5000;
  }

  publish(
    subject: string,
    engine: string,
    message: { seq: bigint; payload: Uint8Array } | { reset: ResetReason },
  ): void {
    const h = natsHeaders();
    h.set(ENGINE_HEADER, engine);
    let payload: Uint8Array = EMPTY;
    if ('reset' in message) h.set(RESET_HEADER, message.reset);
    else {
      h.set(SEQ_HEADER, String(message.seq));
      payload = message.payload;
    }
    this.outstanding++;
    this.js.publish(subject, payload, { headers: h, timeout: this.timeoutMs }).then(
      () => {
        this.acknowledged++;
        this.settled();
      },
      (error: unknown) => {
        this.failed++;
        this.settled();
        this.options.onFailed(subject, error as Error);
      },
    );
  }

  ready(): Promise<void> | undefined {
    if (this.outstanding < this.window) return undefined;
    if (this.waiter === undefined) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.waiter = { promise, resolve };
    }
    return this.waiter.promise;
  }

  /** Resolves once every published message is acknowledged or failed. */
  async drain(): Promise<void> {
    while (this.outstanding > 0) await new Promise((r) => setTimeout(r, 5));
  }

  get pending(): number {
    return this.outstanding;
  }

  private settled(): void {
    this.outstanding--;
    if (this.waiter !== undefined && this.outstanding < this.window / 2) {
      const w = this.waiter;
      this.waiter = undefined;
      w.resolve();
    }
  }
}
