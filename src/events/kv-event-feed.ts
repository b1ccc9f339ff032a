/**
 * One engine's KV events, kept flowing into its event-fed index (docs/kv-events.md): the
 * subscriber, the seq check's consequences, the replay request on a gap, and the fallback to the
 * router's belief index while the events cannot be trusted.
 *
 * What each seq verdict does:
 * - `next`: the message is applied.
 * - `gap`: with a replay endpoint, the missing range is asked for; meanwhile routing reads the
 *   belief index and live messages wait in order. The replayed messages, then the waiting ones,
 *   are applied. A replay that fails, or that starts after the first missing seq (the publisher's
 *   buffer no longer holds it), clears the index first, which is then rebuilt from what arrives.
 *   Without a replay endpoint the index is cleared and rebuilt from new events.
 * - `restart` (seq 0 again: a new publisher): the index is cleared, then the message applied.
 * - `stale` (the subscriber drops it).
 *
 * Connection: until ZeroMQ reports a connection, and after it reports a disconnection, the
 * instance is not fed (routing reads its belief index) and a warning says so. A reconnection may
 * be a restarted engine, so the index is cleared and the seq forgotten; the first message then
 * reads as a gap from 0 and, with a replay endpoint, the publisher's whole buffer is replayed.
 *
 * Invariants: messages reach the sink in seq order, each once; the sink is fed only while
 * connected and not replaying; messages of one event-loop turn reach the sink in one apply()
 * (one batched addon call).
 */
import type { KvEventMessage } from './kv-event-batch.js';
import { KvEventReplayClient, type ReplayResult } from './kv-event-replay.js';
import type { SeqVerdict } from './kv-event-seq.js';
import { KvEventSubscriber, type KvConnectionEvent } from './kv-event-subscriber.js';
import { TurnBatch } from './turn-batch.js';

/** Where one instance's events go: its event-fed index in the router. */
export interface KvEventSink {
  /** Applies the messages' events in order. */
  apply(messages: readonly KvEventMessage[]): void;
  /** Empties the instance's event-fed index. */
  clear(): void;
  /** Whether routing reads the instance's event-fed index (true) or its belief index (false). */
  setFed(fed: boolean): void;
}

export interface KvEventFeedOptions {
  /** The engine's PUB endpoint, e.g. tcp://10.0.0.5:5557. */
  endpoint: string;
  /** Its replay (ROUTER) endpoint, if it has one. */
  replay?: string | undefined;
  sink: KvEventSink;
  /** A replay that has not ended by then fails (the index is rebuilt instead). Default 2000 ms. */
  replayTimeoutMs?: number;
  onWarning?: (message: string) => void;
}

export type KvEventFeedState = 'connecting' | 'live' | 'replaying' | 'down';

export interface KvEventFeedStats {
  endpoint: string;
  replay: string | null;
  state: KvEventFeedState;
  /** Messages received and decoded (stale ones included). */
  messages: number;
  events: number;
  malformed: number;
  unknownEvents: number;
  gaps: number;
  /** Messages the gaps skipped (before any replay). */
  missing: number;
  stale: number;
  restarts: number;
  replays: number;
  replayFailures: number;
  /** Times the index was cleared to be rebuilt from new events (a gap not replayed in full). */
  rebuilds: number;
  disconnects: number;
  lastError: string | null;
}

export class KvEventFeed {
  private readonly subscriber: KvEventSubscriber;
  private readonly replayClient: KvEventReplayClient | undefined;
  private readonly sink: KvEventSink;
  private readonly warn: (message: string) => void;
  private connected = false;
  private everConnected = false;
  private warnedRetry = false;
  private replaying = false;
  /** Messages received while a replay is in flight, with their verdicts, in order. */
  private waiting: Array<{ message: KvEventMessage; verdict: Exclude<SeqVerdict, { kind: 'stale' }> }> = [];
  /** Messages of this event-loop turn, applied in one sink.apply() when it ends. */
  private readonly pending = new TurnBatch<KvEventMessage>((batch) => {
    if (!this.closed) this.sink.apply(batch);
  });
  private fed = false;
  private closed = false;
  private readonly counts = { replays: 0, replayFailures: 0, rebuilds: 0, disconnects: 0 };

  constructor(private readonly options: KvEventFeedOptions) {
    this.sink = options.sink;
    this.warn = options.onWarning ?? ((message) => process.emitWarning(message, { code: 'KVROUTE_KV_EVENTS' }));
    this.subscriber = new KvEventSubscriber(
      options.endpoint,
      (message, verdict) => this.received(message, verdict),
      (event) => this.connection(event),
    );
    this.replayClient =
      options.replay === undefined ? undefined : new KvEventReplayClient(options.replay, options.replayTimeoutMs);
    this.sink.setFed(false);
  }

  /** Connects (resolves once the socket is set up, not when the publisher answers). */
  start(): Promise<void> {
    return this.subscriber.start();
  }

  get state(): KvEventFeedState {
    if (!this.connected) return this.everConnected ? 'down' : 'connecting';
    return this.replaying ? 'replaying' : 'live';
  }

  stats(): KvEventFeedStats {
    const s = this.subscriber;
    return {
      endpoint: this.options.endpoint,
      replay: this.options.replay ?? null,
      state: this.state,
      messages: s.counts.messages,
      events: s.counts.events,
      malformed: s.counts.malformed,
      unknownEvents: s.counts.unknownEvents,
      gaps: s.seq.counts.gaps,
      missing: Number(s.seq.counts.missing),
      stale: s.seq.counts.stale,
      restarts: s.seq.counts.restarts,
      ...this.counts,
      lastError: s.lastError ?? null,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.replayClient?.close();
    await this.subscriber.close();
    this.pending.clear();
    this.waiting = [];
  }

  /** For tests of the verdict rules without a socket. */
  receivedForTest(message: KvEventMessage, verdict: Exclude<SeqVerdict, { kind: 'stale' }>): void {
    this.received(message, verdict);
  }

  /** For tests of the connection rules without a socket. */
  connectionForTest(event: KvConnectionEvent): void {
    this.connection(event);
  }

  private received(message: KvEventMessage, verdict: Exclude<SeqVerdict, { kind: 'stale' }>): void {
    if (this.closed) return;
    if (this.replaying) {
      this.waiting.push({ message, verdict });
      return;
    }
    this.take(message, verdict);
  }

  /** Applies one message by its verdict (outside a replay). */
  private take(message: KvEventMessage, verdict: Exclude<SeqVerdict, { kind: 'stale' }>): void {
    if (verdict.kind === 'restart') {
      this.flush();
      this.sink.clear();
    } else if (verdict.kind === 'gap') {
      this.flush();
      if (this.replayClient !== undefined) {
        this.startReplay(verdict.from, message);
        return;
      }
      this.rebuild();
    }
    this.pending.push(message);
  }

  private flush(): void {
    this.pending.flush();
  }

  private rebuild(): void {
    this.counts.rebuilds++;
    this.sink.clear();
  }

  private startReplay(from: bigint, gapMessage: KvEventMessage): void {
    this.replaying = true;
    this.counts.replays++;
    this.updateFed();
    this.waiting = [{ message: gapMessage, verdict: { kind: 'next' } }];
    this.replayClient!.request(from).then(
      (result) => this.replayed(from, gapMessage.seq, result),
      (error: unknown) => {
        if (this.closed) return;
        this.counts.replayFailures++;
        this.warn(
          `kv events ${this.options.endpoint}: replay failed (${(error as Error).message}); rebuilding the index from new events`,
        );
        this.rebuild();
        this.endReplay();
      },
    );
  }

  private replayed(from: bigint, gapSeq: bigint, result: ReplayResult): void {
    if (this.closed) return;
    const wanted = result.messages.filter((m) => m.seq < gapSeq);
    const complete =
      gapSeq === from ||
      (wanted.length > 0 && wanted[0]!.seq === from && wanted.at(-1)!.seq === gapSeq - 1n && isContiguous(wanted));
    if (!complete) {
      this.counts.replayFailures++;
      this.warn(
        `kv events ${this.options.endpoint}: the replay did not hold seq ${from}..${gapSeq - 1n}; rebuilding the index from new events`,
      );
      this.rebuild();
    }
    if (wanted.length > 0) this.sink.apply(wanted);
    this.endReplay();
  }

  /** Applies what waited during the replay, in order, and resumes. */
  private endReplay(): void {
    this.replaying = false;
    const waiting = this.waiting;
    this.waiting = [];
    for (const { message, verdict } of waiting) {
      if (this.replaying) this.waiting.push({ message, verdict });
      else this.take(message, verdict);
    }
    this.flush();
    this.updateFed();
  }

  private connection(event: KvConnectionEvent): void {
    if (this.closed) return;
    if (event === 'connect') {
      if (this.everConnected) {
        // Maybe a restarted engine: what the index holds, and the seq, belong to the old one.
        this.flush();
        this.subscriber.seq.forget();
        this.sink.clear();
        this.warn(`kv events ${this.options.endpoint}: reconnected; the index is rebuilt from the engine's events`);
      }
      this.connected = true;
      this.everConnected = true;
    } else if (event === 'disconnect') {
      if (!this.connected) return;
      this.connected = false;
      this.counts.disconnects++;
      this.warn(`kv events ${this.options.endpoint}: disconnected; routing on the belief index until it returns`);
    } else if (!this.everConnected && !this.warnedRetry) {
      this.warnedRetry = true;
      this.warn(`kv events ${this.options.endpoint}: cannot connect; routing on the belief index until it does`);
    }
    this.updateFed();
  }

  private updateFed(): void {
    const fed = this.connected && !this.replaying && !this.closed;
    if (fed === this.fed) return;
    this.fed = fed;
    this.sink.setFed(fed);
  }
}

function isContiguous(messages: readonly KvEventMessage[]): boolean {
  for (let i = 1; i < messages.length; i++) if (messages[i]!.seq !== messages[i - 1]!.seq + 1n) return false;
  return true;
}
