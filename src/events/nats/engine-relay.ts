/**
 * One engine's KV events relayed from its ZeroMQ socket to its JetStream subject (docs/scale-out.md,
 * "One event plane over NATS"). Payloads are forwarded as the engine sent them (the relay checks
 * framing and seq, not the msgpack inside: every replica checks each payload as it applies it), so
 * relaying costs a copy, not a decode.
 *
 * The stream a replica reads must describe the engine: for one subject, messages are in the
 * engine's seq order, each once, and wherever that cannot hold a reset marker says so (the
 * replica then empties the engine's index and rebuilds it from what follows). Per seq verdict:
 * - `next`: published.
 * - `stale` (at or below the last published): skipped, except as the first message after a
 *   (re)connection, where it means the engine restarted (a live engine's seq only grows): a
 *   reset marker, then the message.
 * - `restart` (seq 0 again): a reset marker, then the message.
 * - `gap`: the missing range is asked of the replay socket, from the last published seq on, while
 *   live messages wait in order. If the replayed message at the last published seq is not the one
 *   published (an engine restarted while its socket reconnected, its new life already past that
 *   seq), a reset marker (engine restart), then the new life's messages. Otherwise a complete
 *   replay is published, then the waiting ones; a partial or failed replay, or no replay socket,
 *   publishes a reset marker first.
 * The relay starts from the last seq the stream holds for the engine, so a restarted relay repairs
 * the gap its downtime left from the engine's replay buffer instead of resetting the replicas.
 * A publish NATS did not acknowledge makes the next message a reset marker.
 *
 * Hazard: an engine restart is told from a gap by comparing payloads at the last published seq;
 * without a replay socket, or once its buffer no longer holds that seq, a restart reads as a gap
 * (a reset marker either way, only its reason differs).
 */
import { KvEventSeq } from '../kv-event-seq.js';
import { KvEventReplayClient, type ReplayedPayload } from '../kv-event-replay.js';
import type { ResetReason } from './event-subjects.js';

/** Where the relay puts an engine's messages (a JetStream publisher, or a test's array). */
export interface EventPublisher {
  /** Publishes one message: the engine's seq and payload, or a reset marker. Never throws. */
  publish(
    subject: string,
    engine: string,
    message: { seq: bigint; payload: Uint8Array } | { reset: ResetReason },
  ): void;
  /** Resolves when the publisher can take more (its unacknowledged messages are below its window). */
  ready(): Promise<void> | undefined;
}

export interface EngineRelayOptions {
  /** The engine's backend URL (its name on the event plane). */
  engine: string;
  subject: string;
  endpoint: string;
  replay?: string | undefined;
  /** The engine's last seq the stream holds (-1: none, or a reset marker last), and its payload. */
  lastPublished: bigint;
  lastPayload?: Uint8Array | undefined;
  publisher: EventPublisher;
  log(line: string): void;
  replayTimeoutMs?: number;
}

export interface EngineRelayStats {
  engine: string;
  endpoint: string;
  subject: string;
  connected: boolean;
  /** Messages published (replayed ones included), and their payload bytes. */
  published: number;
  bytes: number;
  /** Received messages of the wrong frame shape (skipped). */
  malformed: number;
  stale: number;
  gaps: number;
  replays: number;
  replayFailures: number;
  resets: number;
  lastSeq: string;
}

export class EngineRelay {
  private readonly seq = new KvEventSeq();
  private readonly replayClient: KvEventReplayClient | undefined;
  private socket: import('zeromq').Subscriber | undefined;
  private loop: Promise<void> | undefined;
  private closed = false;
  private connected = false;
  /** True until the first message after a (re)connection has been taken. */
  private firstSinceConnect = true;
  private replaying = false;
  private waiting: ReplayedPayload[] = [];
  private resetNext: ResetReason | undefined;
  /** The last published message, to recognise the same engine in a replay. */
  private last: { seq: bigint; payload: Uint8Array } | undefined;
  private readonly counts = { published: 0, bytes: 0, malformed: 0, replays: 0, replayFailures: 0, resets: 0 };

  constructor(private readonly options: EngineRelayOptions) {
    if (options.lastPublished >= 0n) {
      this.seq.resume(options.lastPublished);
      if (options.lastPayload !== undefined) this.last = { seq: options.lastPublished, payload: options.lastPayload };
    }
    this.replayClient =
      options.replay === undefined ? undefined : new KvEventReplayClient(options.replay, options.replayTimeoutMs);
  }

  async start(): Promise<void> {
    if (this.socket !== undefined || this.closed) return;
    const { Subscriber } = await import('zeromq');
    // A high receive water mark: a burst the relay has not read yet waits here, not dropped.
    const socket = new Subscriber({ receiveHighWaterMark: 100_000 });
    socket.events.on('connect', () => {
      this.connected = true;
      this.firstSinceConnect = true;
    });
    socket.events.on('disconnect', () => {
      if (this.connected) this.options.log(`relay ${this.options.engine}: disconnected from ${this.options.endpoint}`);
      this.connected = false;
    });
    socket.connect(this.options.endpoint);
    socket.subscribe();
    this.socket = socket;
    this.loop = this.receive(socket);
  }

  private async receive(socket: import('zeromq').Subscriber): Promise<void> {
    try {
      for await (const frames of socket) {
        this.take(frames);
        const ready = this.options.publisher.ready();
        if (ready !== undefined) await ready;
      }
    } catch (error) {
      if (!this.closed) this.options.log(`relay ${this.options.engine}: receive failed: ${(error as Error).message}`);
    }
  }

  /** One received ZeroMQ message (exposed for tests of the seq rules). */
  take(frames: readonly Uint8Array[]): void {
    if (frames.length !== 3 || frames[1]!.length !== 8) {
      this.counts.malformed++;
      return;
    }
    const s = frames[1]!;
    const seq = new DataView(s.buffer, s.byteOffset, 8).getBigInt64(0, false);
    const payload = frames[2]!;
    if (this.replaying) {
      this.waiting.push({ seq, payload: Buffer.from(payload.buffer, payload.byteOffset, payload.length) });
      return;
    }
    this.takeInOrder(seq, payload);
  }

  private takeInOrder(seq: bigint, payload: Uint8Array): void {
    const first = this.firstSinceConnect;
    this.firstSinceConnect = false;
    if (first && seq <= this.seq.lastApplied && seq !== 0n) {
      // Below what the stream holds for a running engine: it restarted while we were away.
      this.seq.forget();
      this.resetNext = 'engine-restart';
    }
    const verdict = this.seq.observe(seq);
    if (verdict.kind === 'stale') return;
    if (verdict.kind === 'restart') this.resetNext = 'engine-restart';
    if (verdict.kind === 'gap') {
      if (this.replayClient !== undefined) {
        this.startReplay(verdict.from, {
          seq,
          payload: Buffer.from(payload.buffer, payload.byteOffset, payload.length),
        });
        return;
      }
      this.resetNext ??= 'gap';
    }
    this.publish(seq, payload);
  }

  private publish(seq: bigint, payload: Uint8Array): void {
    const { publisher, subject, engine } = this.options;
    if (this.resetNext !== undefined) {
      publisher.publish(subject, engine, { reset: this.resetNext });
      this.options.log(`relay ${engine}: reset marker (${this.resetNext}) before seq ${seq}`);
      this.counts.resets++;
      this.resetNext = undefined;
    }
    publisher.publish(subject, engine, { seq, payload });
    this.last = { seq, payload };
    this.counts.published++;
    this.counts.bytes += payload.length;
  }

  /** NATS did not acknowledge a message of this engine: the next one is preceded by a reset marker. */
  publishFailed(): void {
    this.resetNext ??= 'publish-failed';
  }

  private startReplay(from: bigint, gapMessage: ReplayedPayload): void {
    this.replaying = true;
    this.counts.replays++;
    this.waiting = [gapMessage];
    // From the last published one when known: the replay then shows whether it is the same engine.
    const anchor = this.last !== undefined && this.last.seq === from - 1n ? this.last : undefined;
    this.replayClient!.requestPayloads(anchor?.seq ?? from).then(
      (result) => this.replayed(from, gapMessage.seq, result.messages, anchor),
      (error: unknown) => {
        if (this.closed) return;
        this.counts.replayFailures++;
        this.options.log(`relay ${this.options.engine}: replay failed (${(error as Error).message}); replicas rebuild`);
        this.resetNext ??= 'gap';
        this.endReplay();
      },
    );
  }

  private replayed(
    from: bigint,
    gapSeq: bigint,
    messages: readonly ReplayedPayload[],
    anchor: { seq: bigint; payload: Uint8Array } | undefined,
  ): void {
    if (this.closed) return;
    const atAnchor = anchor === undefined ? undefined : messages.find((m) => m.seq === anchor.seq);
    if (anchor !== undefined && atAnchor !== undefined && !Buffer.from(atAnchor.payload).equals(anchor.payload)) {
      // Another engine answers at the last published seq: a new life, published from its start.
      this.options.log(`relay ${this.options.engine}: the engine restarted (seq ${anchor.seq} differs in its replay)`);
      this.resetNext = 'engine-restart';
      this.replayClient!.requestPayloads(0n).then(
        (result) => this.replayedLife(gapSeq, result.messages),
        () => this.replayedLife(gapSeq, []),
      );
      return;
    }
    const wanted = messages.filter((m) => m.seq >= from && m.seq < gapSeq);
    const contiguous = wanted.every((m, i) => i === 0 || m.seq === wanted[i - 1]!.seq + 1n);
    const complete =
      gapSeq === from ||
      (wanted.length > 0 && wanted[0]!.seq === from && wanted.at(-1)!.seq === gapSeq - 1n && contiguous);
    if (!complete) {
      this.counts.replayFailures++;
      this.options.log(
        `relay ${this.options.engine}: the replay did not hold seq ${from}..${gapSeq - 1n}; replicas rebuild`,
      );
      this.resetNext ??= 'gap';
    }
    // What the replay holds is published even when partial: after the reset it is a start.
    if (contiguous) for (const m of wanted) this.publish(m.seq, m.payload);
    this.endReplay();
  }

  /** A restarted engine's messages before `gapSeq`, published if its buffer holds them all from seq 0. */
  private replayedLife(gapSeq: bigint, messages: readonly ReplayedPayload[]): void {
    if (this.closed) return;
    const life = messages.filter((m) => m.seq < gapSeq);
    if (life.length > 0 && life.every((m, i) => m.seq === BigInt(i)))
      for (const m of life) this.publish(m.seq, m.payload);
    else this.counts.replayFailures++;
    this.endReplay();
  }

  /** Publishes what waited during the replay, in order, through the seq rules again. */
  private endReplay(): void {
    this.replaying = false;
    const waiting = this.waiting;
    this.waiting = [];
    // The gap message was observed already; the seq check resumes from the last published.
    const gap = waiting.shift();
    if (gap !== undefined) {
      this.seq.resume(gap.seq - 1n);
      this.takeInOrder(gap.seq, gap.payload);
    }
    for (const m of waiting) {
      if (this.replaying) this.waiting.push(m);
      else this.takeInOrder(m.seq, m.payload);
    }
  }

  stats(): EngineRelayStats {
    return {
      engine: this.options.engine,
      endpoint: this.options.endpoint,
      subject: this.options.subject,
      connected: this.connected,
      ...this.counts,
      stale: this.seq.counts.stale,
      gaps: this.seq.counts.gaps,
      lastSeq: String(this.seq.lastApplied),
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.replayClient?.close();
    this.socket?.close();
    await this.loop;
  }
}
