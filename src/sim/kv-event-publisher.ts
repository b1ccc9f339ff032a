/**
 * One simulated engine's KV cache event publisher, as vLLM's ZmqEventPublisher does it
 * (docs/kv-events.md, "Publishing"): a ZeroMQ PUB socket sending each batch as three frames
 * (topic, seq as 8 bytes big-endian, msgpack KVEventBatch), seq counting from 0; and, optionally,
 * a ROUTER socket answering replay requests from a buffer of the last `bufferSteps` messages.
 *
 * Replay, exactly as vLLM's `_service_replay`: a request arrives at the ROUTER as three frames
 * (client identity, an empty delimiter, the start seq as 8 bytes big-endian, read unsigned);
 * anything else is counted and ignored, unanswered. The answer is every buffered message with
 * seq ≥ start, each as (identity, empty, seq, payload), then (identity, empty, seq −1, empty
 * payload). A client that connects with a DEALER socket sends (empty, seq) and reads
 * (empty, seq, payload) frames; with a REQ socket the delimiter is implicit. When `start` is older
 * than the buffer, the answer begins at the oldest buffered message: the client must check.
 *
 * Invariants:
 * - seq numbers are given in `publish` order, with no gaps, and the replay buffer holds the same
 *   bytes as were sent;
 * - sends are serialized (zeromq allows one send in flight per socket); a PUB send never waits on
 *   a slow subscriber (ZeroMQ drops at the high-water mark, and the seq check reports the gap);
 * - `close()` sends what is queued (a PUB send does not block), then closes both sockets with
 *   a bounded linger, so a closed publisher never keeps the process alive.
 */
import type { Publisher, Router } from 'zeromq';

import { encodeKvEventBatch, seqFrame, type KvEventEncoding, type PublishedKvEvent } from './kv-event-encoding.js';

/** vLLM's default buffer_steps. */
export const DEFAULT_REPLAY_BUFFER = 10_000;
/** vLLM's default hwm for the PUB socket. */
export const DEFAULT_PUB_HWM = 100_000;

export interface KvEventPublisherOptions {
  /** PUB endpoint to bind: `tcp://HOST:PORT` (`tcp://HOST:*` picks a free port). */
  endpoint: string;
  /** ROUTER endpoint to bind for replay requests; none when absent. */
  replayEndpoint?: string;
  encoding: KvEventEncoding;
  /** Messages kept for replay (default 10,000, vLLM's buffer_steps). */
  bufferSteps?: number;
  /** The first frame of every message (default "", vLLM's default topic). */
  topic?: string;
  /** The batch's data_parallel_rank (default 0). */
  dataParallelRank?: number;
}

export interface KvEventPublisherCounts {
  messages: number;
  events: number;
  replayRequests: number;
  /** Replay requests that were not (identity, empty, 8-byte seq): ignored, as vLLM does. */
  badReplayRequests: number;
  /** Sends that failed (logged once each on stderr; the message stays in the replay buffer). */
  sendErrors: number;
}

export class KvEventPublisher {
  readonly counts: KvEventPublisherCounts = {
    messages: 0,
    events: 0,
    replayRequests: 0,
    badReplayRequests: 0,
    sendErrors: 0,
  };
  private nextSeq = 0;
  private readonly topic: Buffer;
  /** Payloads of seqs [nextSeq − buffered, nextSeq), in a ring: seq s at s % capacity. */
  private readonly ring: Buffer[];
  private readonly queue: Buffer[][] = [];
  private draining: Promise<void> | undefined;
  private replayLoop: Promise<void> | undefined;
  private closed = false;

  private constructor(
    private readonly options: KvEventPublisherOptions,
    private readonly pub: Publisher,
    private readonly router: Router | undefined,
  ) {
    this.topic = Buffer.from(options.topic ?? '', 'utf8');
    this.ring = new Array<Buffer>(options.bufferSteps ?? DEFAULT_REPLAY_BUFFER);
    if (router !== undefined) this.replayLoop = this.serveReplays(router);
  }

  /** Binds the PUB (and ROUTER) sockets; rejects, holding nothing open, if either cannot bind. */
  static async start(options: KvEventPublisherOptions): Promise<KvEventPublisher> {
    const buffer = options.bufferSteps ?? DEFAULT_REPLAY_BUFFER;
    if (!(Number.isSafeInteger(buffer) && buffer > 0))
      throw new RangeError(`bufferSteps must be a positive integer, got ${buffer}`);
    const { Publisher, Router } = await import('zeromq');
    const pub = new Publisher({ linger: 200, sendHighWaterMark: DEFAULT_PUB_HWM });
    let router: Router | undefined;
    try {
      await pub.bind(options.endpoint);
      if (options.replayEndpoint !== undefined) {
        router = new Router({ linger: 0 });
        await router.bind(options.replayEndpoint);
      }
    } catch (error) {
      pub.close();
      router?.close();
      throw error;
    }
    return new KvEventPublisher(options, pub, router);
  }

  /** The bound PUB endpoint (with the port a `*` picked). */
  get endpoint(): string {
    return this.pub.lastEndpoint ?? this.options.endpoint;
  }

  /** The bound ROUTER endpoint, if replay is on. */
  get replayEndpoint(): string | undefined {
    return this.router === undefined ? undefined : (this.router.lastEndpoint ?? this.options.replayEndpoint);
  }

  get encoding(): KvEventEncoding {
    return this.options.encoding;
  }

  /** The seq the next batch will carry (= batches published so far). */
  get seq(): number {
    return this.nextSeq;
  }

  /** Publishes one batch (stamped `ts`, seconds since the epoch); returns its seq. No-op after close. */
  publish(events: readonly PublishedKvEvent[], ts = Date.now() / 1000): number {
    if (this.closed) return -1;
    const seq = this.nextSeq++;
    const payload = encodeKvEventBatch(events, ts, this.options.encoding, this.options.dataParallelRank ?? 0);
    this.ring[seq % this.ring.length] = payload;
    this.counts.messages++;
    this.counts.events += events.length;
    this.queue.push([this.topic, seqFrame(seq), payload]);
    this.draining ??= this.drain();
    return seq;
  }

  /** Sends what is queued, one message at a time, in order. */
  private async drain(): Promise<void> {
    try {
      for (let frames = this.queue.shift(); frames !== undefined; frames = this.queue.shift()) {
        try {
          await this.pub.send(frames);
        } catch (error) {
          if (this.pub.closed) return;
          this.counts.sendErrors++;
          process.stderr.write(`kv events ${this.endpoint}: send failed: ${(error as Error).message}\n`);
        }
      }
    } finally {
      this.draining = undefined;
    }
  }

  /** The buffered [seq, payload] pairs with seq ≥ `start`, oldest first (a snapshot). */
  buffered(start: bigint): Array<[number, Buffer]> {
    const oldest = Math.max(0, this.nextSeq - this.ring.length);
    const from = start > BigInt(oldest) ? Number(start > BigInt(this.nextSeq) ? this.nextSeq : start) : oldest;
    const out: Array<[number, Buffer]> = [];
    for (let seq = from; seq < this.nextSeq; seq++) out.push([seq, this.ring[seq % this.ring.length]!]);
    return out;
  }

  private async serveReplays(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        // vLLM answers only (identity, empty delimiter, start seq); it ignores anything else.
        if (frames.length !== 3 || frames[1]!.length !== 0 || frames[2]!.length !== 8) {
          this.counts.badReplayRequests++;
          continue;
        }
        this.counts.replayRequests++;
        const [identity] = frames as [Buffer];
        const empty = Buffer.alloc(0);
        for (const [seq, payload] of this.buffered(frames[2]!.readBigUInt64BE(0)))
          await router.send([identity, empty, seqFrame(seq), payload]);
        await router.send([identity, empty, seqFrame(-1), empty]);
      }
    } catch (error) {
      // Closing the socket ends the iteration (or a send) with an error; anything else is logged.
      if (!this.closed) process.stderr.write(`kv events replay ${this.replayEndpoint}: ${(error as Error).message}\n`);
    }
  }

  /** Sends what is queued, then closes both sockets. Safe more than once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.draining;
    this.pub.close();
    this.router?.close();
    await this.replayLoop;
  }
}
