/**
 * The OTLP/HTTP body being filled: ended requests' spans are encoded (encodeRequestSpans, a chunk
 * at a time) straight into the body that will carry them, after room left for its envelope, which
 * finish() writes once the spans' length is known. No copy between encoding and sending: when a
 * chunk had a buffer of its own, copying every chunk into the body cost two more passes over each
 * request's kilobyte of spans (bench/RESULTS.md, "tracing").
 *
 * Buffers come from, and go back to, a pool (otlp-sender.ts): a body's buffer is in use from its
 * first chunk until its export ended, retries included.
 */
import {
  bodyPrefix,
  encodeRequestSpans,
  envelopeFields,
  maxBodyPrefixBytes,
  type EnvelopeFields,
  type OtlpEnvelope,
} from './otlp-proto.js';
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

/** A new body's first buffer: 1,024 requests of about a kilobyte of spans each. */
const FIRST_BYTES = 1 << 20;

export class OtlpBodyBuilder {
  private readonly fields: EnvelopeFields;
  /** Where the spans start in every buffer: the envelope's room before them. */
  private readonly room: number;
  private buffer: Buffer | undefined;
  private end = 0;
  private held = 0;

  constructor(
    envelope: OtlpEnvelope,
    private readonly pool: BufferPool,
  ) {
    this.fields = envelopeFields(envelope);
    this.room = maxBodyPrefixBytes(this.fields);
  }

  /** Requests whose spans the body holds. */
  get requests(): number {
    return this.held;
  }

  /** Ended requests' spans, encoded together at the body's end. */
  encode(traces: readonly RequestTrace[]): void {
    if (traces.length === 0) return;
    encodeRequestSpans(traces, this.allocate);
    this.held += traces.length;
  }

  /**
   * Room for a chunk of `bytes` bytes of spans at the body's end (encodeRequestSpans' allocate).
   * A body that outgrows its buffer moves to one twice as large.
   */
  private readonly allocate = (bytes: number): Buffer => {
    let buffer = this.buffer;
    if (buffer === undefined) {
      buffer = this.buffer = this.pool.allocate(Math.max(FIRST_BYTES, this.room + bytes));
      this.end = this.room;
    } else if (this.end + bytes > buffer.length) {
      const grown = this.pool.allocate(Math.max(2 * buffer.length, this.end + bytes));
      buffer.copy(grown, this.room, this.room, this.end);
      this.pool.release(buffer);
      buffer = this.buffer = grown;
    }
    const chunk = buffer.subarray(this.end, this.end + bytes);
    this.end += bytes;
    return chunk;
  };

  /** The body, its envelope written before its spans; undefined when it holds none. The next chunk starts a new one. */
  finish(): OtlpBody | undefined {
    const buffer = this.buffer;
    if (buffer === undefined || this.end === this.room) return undefined;
    const start = bodyPrefix(this.fields, this.end - this.room, buffer, this.room);
    const body: OtlpBody = {
      bytes: buffer.subarray(start, this.end),
      spans: buffer.subarray(this.room, this.end),
      buffer,
      requests: this.held,
    };
    this.buffer = undefined;
    this.held = 0;
    return body;
  }
}
