/**
 * One engine's KV event stream (docs/kv-events.md): a ZeroMQ SUB socket on its `kv_events`
 * endpoint, every message decoded and its `seq` checked, handed to `onMessage` in order.
 *
 * Invariants:
 * - a malformed message is counted and skipped (`counts.malformed`, `lastError`); it never ends
 *   the stream;
 * - `onMessage` sees each applied message once, with the seq check's verdict (`next`, `gap`,
 *   `restart`); stale ones are counted and not passed on;
 * - `close()` ends the receive loop and releases the socket; it is safe more than once.
 *
 * The zeromq package is loaded on the first `start()`, so a router that reads no events never
 * loads its native binding.
 */
import { decodeKvEventMessage, KvEventFormatError, type KvEventMessage } from './kv-event-batch.js';
import { KvEventSeq, type SeqVerdict } from './kv-event-seq.js';

export interface KvEventCounts {
  messages: number;
  events: number;
  malformed: number;
  unknownEvents: number;
}

export type KvEventHandler = (message: KvEventMessage, verdict: Exclude<SeqVerdict, { kind: 'stale' }>) => void;

/**
 * What ZeroMQ reports of the connection: `connect` (a TCP connection to the publisher is up),
 * `disconnect` (it dropped: the engine died or the network failed) and `retry` (a connection
 * attempt failed and will be retried).
 */
export type KvConnectionEvent = 'connect' | 'disconnect' | 'retry';

export class KvEventSubscriber {
  readonly seq = new KvEventSeq();
  readonly counts: KvEventCounts = { messages: 0, events: 0, malformed: 0, unknownEvents: 0 };
  /** The last malformed message's reason, for `stats()` and warnings. */
  lastError: string | undefined;
  private socket: import('zeromq').Subscriber | undefined;
  private loop: Promise<void> | undefined;
  private closed = false;

  constructor(
    readonly endpoint: string,
    private readonly onMessage: KvEventHandler,
    private readonly onConnection: (event: KvConnectionEvent) => void = () => {},
  ) {}

  /** Connects and starts receiving; resolves once the socket is connected (not when data flows). */
  async start(): Promise<void> {
    if (this.socket !== undefined || this.closed) return;
    const { Subscriber } = await import('zeromq');
    const socket = new Subscriber();
    socket.events.on('connect', () => this.onConnection('connect'));
    socket.events.on('disconnect', () => this.onConnection('disconnect'));
    socket.events.on('connect:retry', () => this.onConnection('retry'));
    socket.connect(this.endpoint);
    socket.subscribe();
    this.socket = socket;
    this.loop = this.receive(socket);
  }

  private async receive(socket: import('zeromq').Subscriber): Promise<void> {
    try {
      for await (const frames of socket) this.take(frames);
    } catch (error) {
      // Closing the socket ends the iteration with an error; anything else is unexpected.
      if (!this.closed) throw error;
    }
  }

  /** One received message (exposed for tests of the skip rules). */
  take(frames: readonly Uint8Array[]): void {
    let message: KvEventMessage;
    try {
      message = decodeKvEventMessage(frames);
    } catch (error) {
      if (!(error instanceof KvEventFormatError)) throw error;
      this.counts.malformed += 1;
      this.lastError = error.message;
      return;
    }
    this.counts.messages += 1;
    this.counts.unknownEvents += message.batch.unknownEvents;
    const verdict = this.seq.observe(message.seq);
    if (verdict.kind === 'stale') return;
    this.counts.events += message.batch.events.length;
    this.onMessage(message, verdict);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.socket?.close();
    await this.loop;
  }
}
