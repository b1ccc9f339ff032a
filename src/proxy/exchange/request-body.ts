/**
 * A completion request's body on its way in: capped (--max-body), paid for in the body budget
 * (--max-body-memory, body-budget.ts), decoded if compressed (request-encoding.ts), and handed
 * over whole.
 *
 * - open() checks the head: a declared Content-Length over the cap, an unsupported coding, or a
 *   declared length the budget cannot take is refused before a byte is buffered (the caller
 *   closes the connection: the unread body must not be taken for the next request). A declared
 *   length is reserved whole and read into one buffer of that size (the reservation bounds what
 *   declared lengths can allocate); a body without one (chunked) reserves chunk by chunk.
 * - data() copies each chunk (uWS neuters it when its callback returns) and, at the last one,
 *   hands the bytes to `whole`, after decoding them off the event loop when compressed.
 * - Decoding (request-encoding.ts) pays for each decoded chunk as zlib produces it: the chunk is
 *   reserved in the budget before it is kept, so a compression bomb meets --max-body-memory (503)
 *   or --max-body (413) within one chunk, and its decoder is destroyed there. While decoding, the
 *   reservation is the compressed bytes plus the decoded ones so far; once decoded, it is the
 *   decoded body alone (the compressed bytes are dropped and their share given back).
 * - release() gives the reservation back, once, when the request ends, however it ends; a
 *   decoder still running then is stopped at its next chunk, which is not reserved.
 *
 * Failures go to the sink's `bodyFailed(error, closeConnection)`; after one, the reader does nothing more.
 */
import type { BodyBudget } from './body-budget.js';
import { ClientError } from '../server/error-body.js';
import {
  ACCEPT_ENCODING,
  bodyEncoding,
  decodeBody,
  DecodeAbandoned,
  unsupportedEncoding,
  type BodyEncoding,
} from './request-encoding.js';

export interface BodySink {
  /** The whole (decoded) body. */
  whole(bytes: Buffer): void;
  bodyFailed(error: unknown, closeConnection: boolean, headers?: readonly string[]): void;
  /** False once the request is over (client gone, answered): late results are dropped. */
  live(): boolean;
}

export class RequestBodyReader {
  /** Bytes reserved in the budget. */
  private reserved = 0;
  private reservedUpFront = false;
  private encoding: BodyEncoding = 'identity';
  private body: Buffer | undefined;
  private chunks: Buffer[] | undefined;
  private received = 0;
  /** release() ran: nothing is reserved any more, whatever arrives late. */
  private released = false;

  constructor(
    private readonly maxBytes: number,
    private readonly budget: BodyBudget,
    private readonly sink: BodySink,
  ) {}

  /** Checks the head; false when the request was refused (and the body must not be read). */
  open(contentLength: number, contentEncoding: string): boolean {
    if (contentLength > this.maxBytes) return this.fail(this.tooLarge(), true);
    const encoding = bodyEncoding(contentEncoding);
    if (encoding === undefined) return this.fail(unsupportedEncoding(contentEncoding), true, ACCEPT_ENCODING);
    this.encoding = encoding;
    if (contentLength >= 0) {
      if (!this.budget.reserve(contentLength)) return this.fail(this.budget.refusal(), true);
      this.reserved = contentLength;
      this.reservedUpFront = true;
      this.body = Buffer.allocUnsafe(contentLength);
    } else this.chunks = [];
    return true;
  }

  data(chunk: ArrayBuffer, isLast: boolean): void {
    if (!this.sink.live()) return;
    const size = chunk.byteLength;
    // A refusal at the last chunk leaves no unread body: the connection can stay open.
    if (this.received + size > this.maxBytes) return void this.fail(this.tooLarge(), !isLast);
    if (!this.reservedUpFront && size > 0) {
      if (!this.budget.reserve(size)) return void this.fail(this.budget.refusal(), !isLast);
      this.reserved += size;
    }
    if (this.body !== undefined && this.received + size <= this.body.length) {
      this.body.set(new Uint8Array(chunk), this.received);
    } else {
      this.chunks ??= [this.body!.subarray(0, this.received)];
      this.body = undefined;
      this.chunks.push(Buffer.from(new Uint8Array(chunk)));
    }
    this.received += size;
    if (!isLast) return;
    const bytes = this.chunks !== undefined ? Buffer.concat(this.chunks) : this.body!.subarray(0, this.received);
    this.chunks = undefined;
    this.body = undefined;
    if (this.encoding === 'identity') return this.sink.whole(bytes);
    decodeBody(bytes, this.encoding, this.maxBytes, (decoded) => this.chargeDecoded(decoded)).then(
      (decoded) => this.decoded(decoded),
      (error: unknown) => {
        if (!(error instanceof DecodeAbandoned) && this.sink.live()) this.sink.bodyFailed(error, false);
      },
    );
  }

  /** Gives the reservation back (idempotent). */
  release(): void {
    this.released = true;
    if (this.reserved === 0) return;
    this.budget.release(this.reserved);
    this.reserved = 0;
  }

  /**
   * The decoder produced `bytes` more: reserved before they are kept. The budget's 503 when they
   * do not fit; null when the request is over (the decoder stops and nothing more is reserved).
   */
  private chargeDecoded(bytes: number): ClientError | null | undefined {
    if (this.released || !this.sink.live()) return null;
    if (!this.budget.reserve(bytes)) return this.budget.refusal();
    this.reserved += bytes;
    return undefined;
  }

  /** A compressed body came back decoded: the reservation shrinks to the decoded bytes alone. */
  private decoded(bytes: Buffer): void {
    if (this.released || !this.sink.live()) return;
    const encoded = this.reserved - bytes.length;
    if (encoded > 0) {
      this.budget.release(encoded);
      this.reserved -= encoded;
    }
    this.sink.whole(bytes);
  }

  private fail(error: ClientError, closeConnection: boolean, headers?: readonly string[]): false {
    this.sink.bodyFailed(error, closeConnection, headers);
    return false;
  }

  private tooLarge(): ClientError {
    return new ClientError(413, `the request body exceeds --max-body (${this.maxBytes} bytes)`, 'body_too_large');
  }
}
