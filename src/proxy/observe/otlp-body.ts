/**
 * The OTLP/HTTP body being filled: ended requests' spans are encoded (by the addon or in
 * TypeScript: otlp-native.ts, a chunk at a time) straight into the body that will carry them, after
 * room left for its envelope, which finish() writes once the spans' length is known. No copy between encoding and sending: when a
 * chunk had a buffer of its own, copying every chunk into the body cost two more passes over each
 * request's kilobyte of spans (bench/RESULTS.md, "tracing").
 *
 * Buffers come from, and go back to, a pool (otlp-sender.ts): a body's buffer is in use from its
 * first chunk until its export ended, retries included.
 */
import {
  bodyPrefix,
  envelopeFields,
  maxBodyPrefixBytes,
  type EnvelopeFields,
  type OtlpEnvelope,
} from './otlp-proto.js';
import { spansEncoder, type SpansEncoder } from './otlp-native.js';
import { ProtoWriter } from './proto-writer.js';
import type { RequestTrace } from './request-trace.js';

/** A finished body: what is sent, its spans alone (to merge bodies), and the buffer to give back. */
export interface OtlpBody {
  readonly bytes: Buffer;
  readonly spans: Buffer;
  readonly buffer: Buffer;
  readonly requests: number;
}

export interface BufferPool {
  /** A buffer of at least `bytes` bytes. */
  allocate(bytes: number): Buffer;
  release(buffer: Buffer): void;
}

/**
 * Requests whose spans are written together: one write for several requests runs with the encoder's
 * code and caches warm (bench/RESULTS.md, "tracing"). finish() writes a part-filled chunk, so no
 * request waits longer than the batch delay.
 */
const ENCODE_CHUNK = 64;
/** A new body's first buffer: 1,024 requests of about a kilobyte of spans each. */
const FIRST_BYTES = 1 << 20;

export class OtlpBodyBuilder {
  private readonly fields: EnvelopeFields;
  /** Where the spans start in every buffer: the envelope's room before them. */
  private readonly room: number;
  /**
   * Writes the spans into the body's buffer (`writer.buf`; `writer.pos` is the body's end). A body
   * that outgrows its buffer moves to one twice as large, from the pool.
   */
  private readonly writer: ProtoWriter;
  private buffer: Buffer | undefined;
  private held = 0;

  /** @param encoder the spans' encoder (otlp-native.ts: the addon's, else TypeScript's) */
  constructor(
    envelope: OtlpEnvelope,
    private readonly pool: BufferPool,
    private readonly encoder: SpansEncoder = spansEncoder(() => {}, false),
  ) {
    this.fields = envelopeFields(envelope);
    this.room = maxBodyPrefixBytes(this.fields);
    this.writer = new ProtoWriter(0, (bytes) => pool.allocate(bytes));
  }

  /** Requests whose spans the body holds. */
  get requests(): number {
    return this.held;
  }

  /** An ended request: its spans are written with the next ENCODE_CHUNK requests'. */
  add(trace: RequestTrace): void {
    this.encoder.add(trace);
    if (this.encoder.pending >= ENCODE_CHUNK) this.encodePending();
  }

  /** Ended requests' spans, written at the body's end now. */
  encode(traces: readonly RequestTrace[]): void {
    for (const t of traces) this.encoder.add(t);
    this.encodePending();
  }

  /** Writes the spans of the requests added so far at the body's end. */
  private encodePending(): void {
    const count = this.encoder.pending;
    if (count === 0) return;
    const w = this.writer;
    if (this.buffer === undefined) {
      w.buf = this.buffer = this.pool.allocate(FIRST_BYTES);
      w.pos = this.room;
    }
    this.encoder.flushInto(w);
    if (w.buf !== this.buffer) {
      // It grew (ProtoWriter.ensure copied the body over): the old buffer goes back to the pool.
      this.pool.release(this.buffer);
      this.buffer = w.buf;
    }
    this.held += count;
  }

  /** The body, its envelope written before its spans; undefined when it holds none. The next chunk starts a new one. */
  finish(): OtlpBody | undefined {
    this.encodePending();
    const buffer = this.buffer;
    const end = this.writer.pos;
    if (buffer === undefined || end === this.room) return undefined;
    const start = bodyPrefix(this.fields, end - this.room, buffer, this.room);
    const body: OtlpBody = {
      bytes: buffer.subarray(start, end),
      spans: buffer.subarray(this.room, end),
      buffer,
      requests: this.held,
    };
    this.buffer = undefined;
    this.held = 0;
    return body;
  }
}
