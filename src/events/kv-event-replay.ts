/**
 * Asks an engine's replay socket for the KV event messages a subscriber missed (docs/kv-events.md).
 *
 * vLLM's protocol (`_service_replay` in vllm/distributed/kv_events.py): the publisher binds a
 * ROUTER socket (`replay_endpoint`); a client (a DEALER) sends two frames, an empty delimiter and
 * the first wanted seq as 8 bytes big-endian (the ROUTER sees three: the client's id, the
 * delimiter, the seq; it ignores any other shape), and receives every buffered message from that
 * seq on as three frames (empty, seq, payload), then the end marker: seq −1 with an empty
 * payload. The publisher keeps only its last `buffer_steps` messages, so the first one
 * returned may come after the one asked for; the caller must check.
 *
 * Invariants:
 * - one request at a time per client (a DEALER matches replies to requests by order alone);
 * - a request settles exactly once: with the messages received (in order, malformed ones counted
 *   and skipped), or with an error when the end marker does not arrive within `timeoutMs`;
 * - after a timeout the socket is replaced, so a late answer cannot be read as the next one's.
 */
import { decodeKvEventBatch, KvEventFormatError, type KvEventMessage } from './kv-event-batch.js';

export interface ReplayResult {
  /** The messages returned with seq ≥ the one asked for, in seq order. */
  messages: KvEventMessage[];
  /** Replayed frames that were not KV event messages (skipped). */
  malformed: number;
}

/** A replayed message not decoded: its seq and its payload frame as received. */
export interface ReplayedPayload {
  seq: bigint;
  payload: Buffer;
}

/** What requestPayloads() returns: framing checked, payloads not. */
export interface RawReplayResult {
  messages: ReplayedPayload[];
  /** Replies of the wrong shape (skipped). */
  malformed: number;
}

export class ReplayTimeoutError extends Error {
  readonly code = 'ERR_KVROUTE_KV_REPLAY' as const;
}

const END_SEQ = -1n;
const EMPTY = Buffer.alloc(0);

export class KvEventReplayClient {
  private socket: import('zeromq').Dealer | undefined;
  private busy = false;
  private closed = false;

  constructor(
    readonly endpoint: string,
    private readonly timeoutMs = 2000,
  ) {}

  private async open(): Promise<import('zeromq').Dealer> {
    if (this.socket !== undefined) return this.socket;
    const { Dealer } = await import('zeromq');
    // linger 0: closing never waits to deliver a request nobody will answer.
    const socket = new Dealer({ linger: 0, receiveTimeout: this.timeoutMs });
    socket.connect(this.endpoint);
    this.socket = socket;
    return socket;
  }

  /** Every buffered message from seq `from` on, up to the end marker, decoded. */
  async request(from: bigint): Promise<ReplayResult> {
    const raw = await this.requestPayloads(from);
    const result: ReplayResult = { messages: [], malformed: raw.malformed };
    for (const { seq, payload } of raw.messages) {
      try {
        result.messages.push({ topic: '', seq, batch: decodeKvEventBatch(payload) });
      } catch (error) {
        if (!(error instanceof KvEventFormatError)) throw error;
        result.malformed++;
      }
    }
    return result;
  }

  /**
   * Every buffered message from seq `from` on, up to the end marker, its payload not decoded (the
   * relay forwards payloads as they are; the replicas decode them).
   */
  async requestPayloads(from: bigint): Promise<RawReplayResult> {
    if (this.closed) throw new ReplayTimeoutError(`replay ${this.endpoint}: closed`);
    if (this.busy) throw new Error('KvEventReplayClient: one request at a time');
    this.busy = true;
    try {
      const socket = await this.open();
      const start = Buffer.alloc(8);
      start.writeBigInt64BE(from);
      await socket.send([EMPTY, start]);
      const deadline = Date.now() + this.timeoutMs;
      const result: RawReplayResult = { messages: [], malformed: 0 };
      for (;;) {
        if (Date.now() > deadline) throw new ReplayTimeoutError(`replay ${this.endpoint}: no end marker`);
        let frames: Buffer[];
        try {
          frames = await socket.receive();
        } catch (error) {
          if ((error as { code?: string }).code === 'EAGAIN')
            throw new ReplayTimeoutError(`replay ${this.endpoint}: no answer within ${this.timeoutMs} ms`);
          throw error;
        }
        if (frames.length !== 3 || frames[0]!.length !== 0 || frames[1]!.length !== 8) {
          result.malformed++;
          continue;
        }
        const seq = frames[1]!.readBigInt64BE(0);
        if (seq === END_SEQ || frames[2]!.length === 0) return result;
        if (seq < from) continue;
        result.messages.push({ seq, payload: frames[2]! });
      }
    } catch (error) {
      // Whatever the publisher still sends for this request must not be read as the next answer.
      this.socket?.close();
      this.socket = undefined;
      throw error;
    } finally {
      this.busy = false;
    }
  }

  close(): void {
    this.closed = true;
    this.socket?.close();
    this.socket = undefined;
  }
}
