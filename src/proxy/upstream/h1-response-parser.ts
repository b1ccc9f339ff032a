/**
 * An incremental HTTP/1.1 response parser for the proxy's lean upstream client (h1-pool.ts).
 *
 * Why: undici's llhttp binding and its request machinery cost the hot path more CPU than the
 * few framings an engine actually sends need. This parser handles exactly those: a status line
 * and headers (latin1 strings, name and value alternating: undici reports the same bytes as
 * Buffers, and the proxy wants strings), then a
 * body framed by Content-Length, by chunked transfer coding (sizes, extensions and trailers may
 * be split across reads anywhere), or by the end of the connection. Informational (1xx) heads
 * are skipped. Chunked framing is removed: the sink sees decoded body bytes.
 *
 * Algorithm: a state machine fed one socket read at a time. The head is located with
 * indexOf('\r\n\r\n') over the bytes seen so far (only the unconsumed tail is rescanned);
 * chunk-size and trailer lines are accumulated until their CRLF. Body bytes are handed to the
 * sink as subarrays of the read (no copy). Complexity: O(bytes) per response.
 *
 * Tunables: MAX_HEAD_BYTES (the head, 1xx heads and the trailer section each) and MAX_LINE_BYTES
 * (a chunk-size line). Anything malformed or over a limit throws a ParseError (code
 * HPE_INVALID_RESPONSE, which the proxy classifies like undici's HPE_* parser errors).
 *
 * Backpressure: feed() returns the number of bytes consumed; when the sink's onBody returns
 * false the parser stops right after that body piece and the caller keeps the rest for later.
 */

export const MAX_HEAD_BYTES = 64 * 1024;
const MAX_LINE_BYTES = 4 * 1024;

export class ParseError extends Error {
  readonly code = 'HPE_INVALID_RESPONSE';
}

export interface ResponseSink {
  /**
   * A final (≥ 200) head: its fields as name, value, … strings (latin1, names as received), and
   * keepAliveHintMs, the Keep-Alive timeout hint (0 if none). False pauses.
   */
  onHead(status: number, statusText: string, rawHeaders: string[], keepAliveHintMs: number): boolean;
  /** Decoded body bytes; false pauses the parser after this piece. */
  onBody(chunk: Buffer): boolean;
  /** The message ended (trailers: name, value strings of a chunked body's trailer section). */
  onEnd(trailers: string[]): void;
}

const enum State {
  Head,
  BodyLength,
  ChunkSize,
  ChunkData,
  ChunkDataEnd,
  Trailers,
  BodyUntilClose,
  Done,
}

const CRLFCRLF = Buffer.from('\r\n\r\n');
const EMPTY: string[] = [];

/** Whether a field name equals `lower`, ignoring ASCII case. */
function lowerEquals(name: string, lower: string): boolean {
  if (name.length !== lower.length) return false;
  for (let i = 0; i < name.length; i++) if ((name.charCodeAt(i) | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}

/**
 * Splits a header block (latin1 text, lines separated by CRLF, no final empty line) into name,
 * value strings: leading spaces and tabs of a value dropped, trailing ones kept (llhttp, hence
 * undici, keeps them). The head is parsed as one string: V8's string scans are cheaper than
 * Buffer#indexOf calls and subarrays for a few hundred bytes.
 */
function parseFields(text: string, start: number, out: string[]): void {
  const end = text.length;
  let pos = start;
  while (pos < end) {
    const first = text.charCodeAt(pos);
    if (first === 0x20 || first === 0x09) throw new ParseError('obsolete header line folding');
    let eol = text.indexOf('\r\n', pos);
    if (eol < 0) eol = end;
    const colon = text.indexOf(':', pos);
    if (colon < 0 || colon >= eol || colon === pos) throw new ParseError('malformed header line');
    for (let i = pos; i < colon; i++) {
      const c = text.charCodeAt(i);
      if (c <= 0x20 || c >= 0x7f) throw new ParseError('invalid header name');
    }
    let value = colon + 1;
    while (value < eol && (text.charCodeAt(value) === 0x20 || text.charCodeAt(value) === 0x09)) value++;
    out.push(text.slice(pos, colon), text.slice(value, eol));
    pos = eol + 2;
  }
}

/** The non-negative decimal a Content-Length value holds (1 to 15 digits, trailing OWS allowed), or -1. */
function decimalValue(value: string): number {
  let end = value.length;
  while (end > 0 && (value.charCodeAt(end - 1) === 0x20 || value.charCodeAt(end - 1) === 0x09)) end--;
  if (end === 0 || end > 15) return -1;
  let n = 0;
  for (let i = 0; i < end; i++) {
    const d = value.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return -1;
    n = n * 10 + d;
  }
  return n;
}

/** The offset of the first CRLF in buf[from, to), or -1. A byte loop: lines here are short. */
function lineEnd(buf: Buffer, from: number, to = buf.length): number {
  const last = Math.min(to, buf.length) - 1;
  for (let i = from; i < last; i++) if (buf[i] === 0x0d && buf[i + 1] === 0x0a) return i;
  return -1;
}

export class ResponseParser {
  private state = State.Head;
  /** Bytes of an incomplete head, chunk-size line or trailer section. */
  private pending: Buffer | undefined;
  private remaining = 0;
  private trailers: string[] = EMPTY;
  /** The sink paused on the head: stop before the body. */
  private holdAfterHead = false;
  /** The connection may carry another request after this response. */
  keepAlive = false;
  /** Any byte of a response (even a 1xx head) was seen. */
  sawBytes = false;
  /** The body runs until the connection closes. */
  get untilClose(): boolean {
    return this.state === State.BodyUntilClose;
  }
  get done(): boolean {
    return this.state === State.Done;
  }
  /** The final head has been delivered. */
  headDone = false;

  constructor(
    private readonly sink: ResponseSink,
    private readonly headRequest = false,
  ) {}

  /** Consumes bytes of `data`; returns how many (fewer than all only when paused or done). */
  feed(data: Buffer): number {
    if (data.length > 0) this.sawBytes = true;
    let pos = 0;
    while (pos < data.length) {
      switch (this.state) {
        case State.Head: {
          const used = this.head(data, pos);
          if (used < 0) return data.length; // incomplete: all kept in pending
          pos = used;
          if (this.holdAfterHead) {
            this.holdAfterHead = false;
            return pos;
          }
          break;
        }
        case State.BodyLength: {
          const n = Math.min(this.remaining, data.length - pos);
          this.remaining -= n;
          const piece = data.subarray(pos, pos + n);
          pos += n;
          if (this.remaining === 0) this.state = State.Done;
          const go = this.sink.onBody(piece);
          if (this.state === State.Done) {
            this.end();
            return pos;
          }
          if (!go) return pos;
          break;
        }
        case State.ChunkSize: {
          const used = this.chunkSize(data, pos);
          if (used < 0) return data.length;
          pos = used;
          break;
        }
        case State.ChunkData: {
          const n = Math.min(this.remaining, data.length - pos);
          this.remaining -= n;
          const piece = data.subarray(pos, pos + n);
          pos += n;
          if (this.remaining === 0) this.state = State.ChunkDataEnd;
          if (!this.sink.onBody(piece)) return pos;
          break;
        }
        case State.ChunkDataEnd: {
          // Two bytes, CRLF, possibly split. Whole in this read (the usual case): no copy.
          if (this.pending === undefined && pos + 2 <= data.length) {
            if (data[pos] !== 0x0d || data[pos + 1] !== 0x0a) throw new ParseError('missing CRLF after chunk data');
            pos += 2;
            this.state = State.ChunkSize;
            break;
          }
          const have = this.pending === undefined ? 0 : this.pending.length;
          const need = 2 - have;
          const take = Math.min(need, data.length - pos);
          const bytes = Buffer.concat([this.pending ?? Buffer.alloc(0), data.subarray(pos, pos + take)]);
          pos += take;
          if (bytes.length < 2) {
            this.pending = bytes;
            break;
          }
          this.pending = undefined;
          if (bytes[0] !== 0x0d || bytes[1] !== 0x0a) throw new ParseError('missing CRLF after chunk data');
          this.state = State.ChunkSize;
          break;
        }
        case State.Trailers: {
          const used = this.trailerSection(data, pos);
          if (used < 0) return data.length;
          return used;
        }
        case State.BodyUntilClose: {
          const piece = pos === 0 ? data : data.subarray(pos);
          pos = data.length;
          if (!this.sink.onBody(piece)) return pos;
          break;
        }
        case State.Done:
          return pos;
      }
    }
    return pos;
  }

  /** The connection ended: completes a read-until-close body; false if the message is incomplete. */
  finish(): boolean {
    if (this.state === State.BodyUntilClose) {
      this.end();
      return true;
    }
    return this.state === State.Done;
  }

  private end(): void {
    this.state = State.Done;
    const trailers = this.trailers;
    this.trailers = EMPTY;
    this.sink.onEnd(trailers);
  }

  /** Returns the offset after the head, or -1 when it is incomplete (bytes kept). */
  private head(data: Buffer, pos: number): number {
    let buf: Buffer;
    let base: number;
    if (this.pending === undefined) {
      buf = data;
      base = pos;
    } else {
      buf = Buffer.concat([this.pending, data.subarray(pos)]);
      base = 0;
    }
    const from = this.pending === undefined ? base : Math.max(0, this.pending.length - 3);
    const at = buf.indexOf(CRLFCRLF, from);
    if (at < 0) {
      if (buf.length - base > MAX_HEAD_BYTES) throw new ParseError('response head too large');
      this.pending = base === 0 && buf !== data ? buf : Buffer.from(buf.subarray(base));
      return -1;
    }
    if (at - base > MAX_HEAD_BYTES) throw new ParseError('response head too large');
    const consumedInBuf = at + 4;
    const afterInData = this.pending === undefined ? consumedInBuf : pos + (consumedInBuf - this.pending.length);
    this.pending = undefined;
    this.parseHead(buf.toString('latin1', base, at));
    return afterInData;
  }

  /** The head as latin1 text: the status line, then the fields. */
  private parseHead(head: string): void {
    let eol = head.indexOf('\r\n');
    if (eol < 0) eol = head.length;
    // "HTTP/1.x SSS[ reason]"
    const minor = head.charCodeAt(7);
    if (
      eol < 12 ||
      !head.startsWith('HTTP/1.') ||
      (minor !== 0x31 && minor !== 0x30) ||
      head.charCodeAt(8) !== 0x20 ||
      (eol > 12 && head.charCodeAt(12) !== 0x20)
    )
      throw new ParseError('malformed status line');
    const d0 = head.charCodeAt(9) - 0x30;
    const d1 = head.charCodeAt(10) - 0x30;
    const d2 = head.charCodeAt(11) - 0x30;
    if (d0 < 1 || d0 > 5 || d1 < 0 || d1 > 9 || d2 < 0 || d2 > 9) throw new ParseError('malformed status code');
    const status = d0 * 100 + d1 * 10 + d2;
    const http10 = minor === 0x30;
    const statusText = eol > 13 ? head.slice(13, eol) : '';
    const raw: string[] = [];
    if (eol + 2 < head.length) parseFields(head, eol + 2, raw);
    if (status < 200) return; // informational: the final head follows

    let contentLength = -1;
    let chunked = false;
    let close = http10;
    let keepAliveHintMs = 0;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!;
      const value = raw[i + 1]!;
      switch (name.length) {
        case 14:
          if (lowerEquals(name, 'content-length')) {
            const n = decimalValue(value);
            if (n < 0) throw new ParseError('invalid content-length');
            if (contentLength >= 0 && contentLength !== n) throw new ParseError('conflicting content-length');
            contentLength = n;
          }
          break;
        case 17:
          if (lowerEquals(name, 'transfer-encoding')) {
            const codings = value.toLowerCase().split(',');
            if (codings[codings.length - 1]!.trim() !== 'chunked')
              throw new ParseError('unsupported transfer-encoding');
            chunked = true;
          }
          break;
        case 10:
          if (lowerEquals(name, 'connection')) {
            const tokens = value.toLowerCase();
            if (/(^|,)\s*close\s*(,|$)/.test(tokens)) close = true;
            else if (http10 && /(^|,)\s*keep-alive\s*(,|$)/.test(tokens)) close = false;
          } else if (lowerEquals(name, 'keep-alive')) {
            const m = /timeout\s*=\s*(\d+)/i.exec(value);
            if (m !== null) keepAliveHintMs = Number(m[1]) * 1000;
          }
          break;
      }
    }
    if (chunked && contentLength >= 0) throw new ParseError('both content-length and transfer-encoding');
    this.headDone = true;
    const noBody = this.headRequest || status === 204 || status === 304;
    if (noBody) {
      this.keepAlive = !close;
      this.state = State.Done;
    } else if (chunked) {
      this.keepAlive = !close;
      this.state = State.ChunkSize;
    } else if (contentLength >= 0) {
      this.keepAlive = !close;
      this.remaining = contentLength;
      this.state = contentLength === 0 ? State.Done : State.BodyLength;
    } else {
      this.keepAlive = false;
      this.state = State.BodyUntilClose;
    }
    const go = this.sink.onHead(status, statusText, raw, keepAliveHintMs);
    if (this.state === State.Done) this.end();
    else this.holdAfterHead = !go;
  }

  /** Returns the offset after the chunk-size line, or -1 when it is incomplete (bytes kept). */
  private chunkSize(data: Buffer, pos: number): number {
    // A line longer than the limit is refused below whether or not its CRLF is found.
    const eol = lineEnd(data, pos, pos + MAX_LINE_BYTES + 2);
    let line: Buffer;
    let after: number;
    if (eol < 0 || this.pending !== undefined) {
      // Split line (or a CR at the end of the pending part): join and rescan.
      const joined =
        this.pending === undefined ? data.subarray(pos) : Buffer.concat([this.pending, data.subarray(pos)]);
      const at = lineEnd(joined, 0, MAX_LINE_BYTES + 2);
      if (at < 0) {
        if (joined.length > MAX_LINE_BYTES) throw new ParseError('chunk-size line too long');
        this.pending = Buffer.from(joined);
        return -1;
      }
      line = joined.subarray(0, at);
      after = pos + (at + 2 - (this.pending === undefined ? 0 : this.pending.length));
      this.pending = undefined;
    } else {
      line = data.subarray(pos, eol);
      after = eol + 2;
    }
    if (line.length > MAX_LINE_BYTES) throw new ParseError('chunk-size line too long');
    let size = 0;
    let i = 0;
    for (; i < line.length; i++) {
      const c = line[i]!;
      let v: number;
      if (c >= 0x30 && c <= 0x39) v = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) v = c - 0x57;
      else if (c >= 0x41 && c <= 0x46) v = c - 0x37;
      else break;
      size = size * 16 + v;
      if (size > Number.MAX_SAFE_INTEGER / 16) throw new ParseError('chunk size too large');
    }
    if (i === 0) throw new ParseError('invalid chunk size');
    // The rest may only be whitespace and chunk extensions (";name[=value]"), which are ignored.
    while (i < line.length && (line[i] === 0x20 || line[i] === 0x09)) i++;
    if (i < line.length && line[i] !== 0x3b) throw new ParseError('invalid chunk size');
    if (size === 0) {
      this.state = State.Trailers;
      return after;
    }
    this.remaining = size;
    this.state = State.ChunkData;
    return after;
  }

  /** The trailer section after the last chunk, up to its empty line. Returns the offset after it or -1. */
  private trailerSection(data: Buffer, pos: number): number {
    const joined = this.pending === undefined ? data.subarray(pos) : Buffer.concat([this.pending, data.subarray(pos)]);
    const pendingLength = this.pending === undefined ? 0 : this.pending.length;
    // Either an immediate CRLF (no trailers) or fields ending in CRLFCRLF.
    if (joined.length >= 2 && joined[0] === 0x0d && joined[1] === 0x0a) {
      this.pending = undefined;
      this.end();
      return pos + 2 - pendingLength;
    }
    const at = joined.indexOf(CRLFCRLF);
    if (at < 0) {
      if (joined.length > MAX_HEAD_BYTES) throw new ParseError('trailer section too large');
      this.pending = Buffer.from(joined);
      return -1;
    }
    this.pending = undefined;
    const trailers: string[] = [];
    parseFields(joined.toString('latin1', 0, at), 0, trailers);
    this.trailers = trailers;
    this.end();
    return pos + at + 4 - pendingLength;
  }
}
