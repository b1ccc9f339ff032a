/**
 * Node's http request and response behind the small slice of uWebSockets.js's HttpRequest and
 * HttpResponse that the proxy's handlers use, so one exchange implementation (routing, retries,
 * relaying, abort, backpressure) serves both the uWS server and `createNodeHandler()`.
 *
 * Semantics kept from uWS:
 * - `onData(chunk, isLast)` hands each body chunk as an ArrayBuffer and ends with `isLast` true
 *   (an empty chunk when the body ended on a boundary). A body already consumed by a framework
 *   (Express's body parsers set `req.body`) is replayed from `req.body` as JSON.
 * - `onAborted` fires once when the client goes away before the response ended.
 * - `write()` returns false when Node's buffer is over its high-water mark; `onWritable` fires
 *   on 'drain', which is when uWS would call it.
 * - `writeStatus('200 OK')` takes uWS's status line; headers may repeat (appendHeader).
 *
 * Hazard: after onAborted, callers never touch the response (as with uWS); these shims also make
 * such writes no-ops rather than throwing on a destroyed stream.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

import type { ClientRequestHead, ClientResponse } from './client-io.js';
import type { RecognizedString } from './uws.js';

/** Node's IncomingMessage seen as a uWS HttpRequest (names lowercased, as uWS gives them). */
export class NodeRequestHead implements ClientRequestHead {
  private readonly path: string;
  private readonly query: string;

  constructor(private readonly req: IncomingMessage) {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    this.path = q < 0 ? url : url.slice(0, q);
    this.query = q < 0 ? '' : url.slice(q + 1);
  }

  forEach(callback: (key: string, value: string) => void): void {
    const raw = this.req.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) callback(raw[i]!.toLowerCase(), raw[i + 1]!);
  }

  getCaseSensitiveMethod(): string {
    return this.req.method ?? 'GET';
  }

  getHeader(name: RecognizedString): string {
    const value = this.req.headers[String(name).toLowerCase()];
    return Array.isArray(value) ? value.join(', ') : (value ?? '');
  }

  getQuery(): string {
    return this.query;
  }

  getUrl(): string {
    return this.path;
  }
}

const toBuffer = (data: RecognizedString): Buffer | string =>
  typeof data === 'string'
    ? data
    : data instanceof ArrayBuffer || data instanceof SharedArrayBuffer
      ? Buffer.from(data)
      : Buffer.from(data.buffer, data.byteOffset, data.byteLength);

const STATUS_LINE = /^(\d{3})(?:\s+(.*))?$/;

/** Node's ServerResponse seen as a uWS HttpResponse. */
export class NodeClientResponse implements ClientResponse {
  private gone = false;

  constructor(
    private readonly req: IncomingMessage & { body?: unknown },
    private readonly res: ServerResponse,
  ) {
    res.on('close', () => {
      if (!res.writableFinished) this.gone = true;
    });
  }

  onAborted(handler: () => void): this {
    this.res.once('close', () => {
      if (!this.res.writableFinished) handler();
    });
    return this;
  }

  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): this {
    const req = this.req;
    if (req.readableEnded || req.body !== undefined) {
      // A framework read the body already: replay what it kept.
      const body = req.body;
      const bytes =
        body === undefined
          ? Buffer.alloc(0)
          : Buffer.isBuffer(body)
            ? body
            : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
      queueMicrotask(() => handler(arrayBufferOf(bytes), true));
      return this;
    }
    req.on('data', (chunk: Buffer) => handler(arrayBufferOf(chunk), false));
    req.on('end', () => handler(new ArrayBuffer(0), true));
    return this;
  }

  cork(callback: () => void): this {
    this.res.cork();
    try {
      callback();
    } finally {
      this.res.uncork();
    }
    return this;
  }

  writeStatus(status: RecognizedString): this {
    const match = STATUS_LINE.exec(String(status));
    if (match !== null && !this.res.headersSent) {
      this.res.statusCode = Number(match[1]);
      if (match[2] !== undefined) this.res.statusMessage = match[2];
    }
    return this;
  }

  writeHeader(key: RecognizedString, value: RecognizedString): this {
    if (!this.res.headersSent) this.res.appendHeader(String(key), String(value));
    return this;
  }

  write(chunk: RecognizedString): boolean {
    if (this.gone) return true;
    return this.res.write(toBuffer(chunk));
  }

  onWritable(handler: (offset: number) => boolean): this {
    this.res.on('drain', () => handler(0));
    return this;
  }

  end(body?: RecognizedString, closeConnection?: boolean): this {
    if (this.gone) return this;
    if (closeConnection === true && !this.res.headersSent) this.res.setHeader('connection', 'close');
    if (body === undefined) this.res.end();
    else this.res.end(toBuffer(body));
    return this;
  }

  close(): this {
    this.res.destroy();
    return this;
  }
}

/** The bytes of a Buffer as an ArrayBuffer (a copy only when the Buffer is a slice of a pool). */
function arrayBufferOf(buffer: Buffer): ArrayBuffer {
  if (buffer.byteOffset === 0 && buffer.byteLength === buffer.buffer.byteLength) return buffer.buffer as ArrayBuffer;
  return buffer.buffer.slice(buffer.byteOffset, buffer.byteOffset + buffer.byteLength) as ArrayBuffer;
}
