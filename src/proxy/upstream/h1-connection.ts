/**
 * One keep-alive socket of an H1Pool (h1-pool.ts) and the request on it: writes the request's
 * head and body in one write, feeds the response parser (h1-response-parser.ts), makes undici's
 * handler callbacks (onConnect, onHeaders, onData, onComplete, onError), pauses the socket for
 * backpressure, and times out its phase when the pool's sweep asks. The pool decides which
 * socket serves which request; this file decides what happens on one socket.
 *
 * Phases of a socket: Connecting → Head (request written, waiting for the head) → Body → Idle
 * (back on the pool's stack) → Head … A socket that errors, times out or is told to close is
 * dead: it never takes another request.
 *
 * Keep-alive hazards: a reused socket may have been closed by the server just as a request was
 * written on it. Such a request that gets EOF or a reset before any response byte is retried
 * once on a fresh connection (as Go's and undici's clients do), invisibly to the caller.
 * `Connection: close` and HTTP/1.0 responses are honoured; `Keep-Alive: timeout=N` drops the idle
 * socket a second before N (undici's threshold); without a hint, idle sockets live
 * IDLE_DEFAULT_MS. Sockets that error are dropped; idle sockets are unref'd.
 *
 * Invariant: a job gets exactly one terminal callback (onComplete or onError; `job.done`), and
 * none after it.
 */
import { connect, type Socket } from 'node:net';

import type { Dispatcher } from 'undici';

import { ResponseParser, type ResponseSink } from './h1-response-parser.js';

/** Longest a hint-less idle socket is kept (undici's keepAliveTimeout default). */
const IDLE_DEFAULT_MS = 4_000;
/** Subtracted from a server's Keep-Alive timeout hint (undici's keepAliveTimeoutThreshold). */
const HINT_MARGIN_MS = 1_000;
/** Longest a hinted idle socket is kept (undici's keepAliveMaxTimeout). */
const MAX_IDLE_MS = 600_000;

export interface H1DispatchOptions {
  path: string;
  method: string;
  /** Flat [name, value, …] (host, content-length and connection are set by the pool). */
  headers: readonly string[];
  body: Buffer;
}

/**
 * undici's handler contract, but for the response head: its fields arrive as latin1 strings
 * (name, value, …), which the proxy relays as they are; undici gives the same bytes as Buffers.
 * AttemptRelay takes either.
 */
export type H1Handler = Pick<Dispatcher.DispatchHandlers, 'onConnect' | 'onData' | 'onError'> & {
  onHeaders(statusCode: number, headers: string[], resume: () => void, statusText: string): boolean;
  onComplete(trailers: string[]): void;
};

/** An error with undici's code (classifyUpstreamError, exchange/upstream-errors.ts, keys on it). */
export class H1Error extends Error {
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message);
  }
}

/** One request through the pool, across its (at most one) keep-alive retry. */
export class Job {
  /** Terminal callback made (onComplete or onError). */
  done = false;
  retried = false;
  connected = false;
  conn: Conn | undefined;
  constructor(
    readonly opts: H1DispatchOptions,
    readonly handler: H1Handler,
  ) {}
}

const enum Phase {
  Connecting,
  Idle,
  /** Request written, waiting for the head. */
  Head,
  Body,
}

/** One socket. */
export class Conn implements ResponseSink {
  readonly socket: Socket;
  phase = Phase.Connecting;
  job: Job | undefined;
  parser: ResponseParser | undefined;
  /** Requests completed on this socket (> 0: reused). */
  served = 0;
  /** Pool tick of the last activity (connect start, write, body bytes). */
  lastTick: number;
  /** Wall-clock ms after which an idle socket is dropped. */
  idleUntil = 0;
  keepAliveMs = IDLE_DEFAULT_MS;
  paused = false;
  /** Unconsumed bytes of a read, kept while paused. */
  rest: Buffer | undefined;
  error: Error | undefined;
  dead = false;
  /** The current request was written on a socket that had served before. */
  reusedForJob = false;
  readonly resume = (): void => this.resumeBody();

  constructor(
    private readonly pool: ConnPool,
    host: string,
    port: number,
  ) {
    this.lastTick = pool.tick;
    const socket = connect({ host, port, noDelay: true });
    this.socket = socket;
    socket.on('connect', () => this.connected());
    socket.on('data', (chunk: Buffer) => this.data(chunk));
    socket.on('end', () => this.ended());
    socket.on('error', (error: Error) => {
      this.error ??= error;
    });
    socket.on('close', () => this.closed());
  }

  // ---- socket events -------------------------------------------------------------------------

  private connected(): void {
    if (this.dead) return;
    this.pool.connectedOne(this);
  }

  private data(chunk: Buffer): void {
    const job = this.job;
    if (job === undefined || this.parser === undefined) {
      // Bytes on an idle socket: the server is confused; drop it.
      this.kill(new H1Error('bad response', 'UND_ERR_SOCKET'));
      return;
    }
    this.lastTick = this.pool.tick;
    this.consume(chunk);
  }

  private consume(chunk: Buffer): void {
    const parser = this.parser!;
    try {
      const used = parser.feed(chunk);
      if (used === chunk.length || this.dead) return;
      // Bytes after a complete response: the server is confused; drop the socket.
      if (parser.done) this.kill(new H1Error('bad response', 'UND_ERR_SOCKET'));
      else this.rest = chunk.subarray(used); // paused
    } catch (error) {
      // A malformed response, or a throw in a handler callback (undici reports those via onError too).
      if (this.parser === parser) this.fail(error as Error);
    }
  }

  private ended(): void {
    // The server half-closed: a read-until-close body completes; anything else failed.
    if (this.job !== undefined && this.parser !== undefined && this.parser.headDone && this.parser.untilClose) {
      if (this.paused) return; // delivered on resume
      this.parser.finish();
      return;
    }
    this.socket.destroy();
  }

  private closed(): void {
    if (this.dead && this.job === undefined) return;
    const job = this.job;
    this.dead = true;
    this.pool.removed(this);
    if (job === undefined || job.done) return;
    if (this.parser !== undefined && this.parser.headDone && this.parser.untilClose && !this.paused) {
      if (this.parser.finish()) return;
    }
    const error = this.error ?? new H1Error('other side closed', 'UND_ERR_SOCKET');
    // A reused keep-alive socket closed before any response byte: the server dropped it as the
    // request went out. Retry once on a fresh connection.
    const code = (this.error as { code?: string } | undefined)?.code;
    if (
      this.reusedForJob &&
      !job.retried &&
      (this.parser === undefined || !this.parser.sawBytes) &&
      (code === undefined || code === 'ECONNRESET' || code === 'EPIPE')
    ) {
      job.retried = true;
      this.job = undefined;
      job.conn = undefined;
      this.pool.requeueFresh(job);
      return;
    }
    this.job = undefined;
    this.pool.finishJob(job, error);
  }

  // ---- request -------------------------------------------------------------------------------

  start(job: Job, host: string): void {
    this.job = job;
    job.conn = this;
    // As undici: onConnect when the request gets its socket (a queued request cannot be aborted).
    // Once per request: the abort function follows a retried request to its fresh socket.
    if (!job.connected) {
      job.connected = true;
      job.handler.onConnect!((error?: Error) => this.pool.abort(job, error));
      if (job.done) return;
    }
    this.reusedForJob = this.served > 0;
    this.phase = Phase.Head;
    this.parser = new ResponseParser(this, job.opts.method === 'HEAD');
    this.lastTick = this.pool.tick;
    this.socket.ref();
    const { opts } = job;
    let head = `${opts.method} ${opts.path} HTTP/1.1\r\nhost: ${host}\r\nconnection: keep-alive\r\ncontent-length: ${opts.body.length}\r\n`;
    const h = opts.headers;
    for (let i = 0; i + 1 < h.length; i += 2) head += `${h[i]}: ${h[i + 1]}\r\n`;
    head += '\r\n';
    const headBytes = Buffer.byteLength(head, 'latin1');
    if (opts.body.length <= 64 * 1024) {
      const out = Buffer.allocUnsafe(headBytes + opts.body.length);
      out.write(head, 0, headBytes, 'latin1');
      opts.body.copy(out, headBytes);
      this.socket.write(out);
    } else {
      this.socket.cork();
      this.socket.write(head, 'latin1');
      this.socket.write(opts.body);
      this.socket.uncork();
    }
  }

  /** Destroys the socket; the close event reports `error` to the job, if any. */
  kill(error: Error): void {
    this.error ??= error;
    this.socket.destroy();
  }

  /** A terminal failure of the current job now (parse error, timeout, abort): no retry. */
  fail(error: Error): void {
    const job = this.job;
    this.job = undefined;
    this.dead = true;
    this.socket.destroy();
    this.pool.removed(this);
    if (job !== undefined) this.pool.finishJob(job, error);
  }

  // ---- ResponseSink --------------------------------------------------------------------------

  onHead(status: number, statusText: string, rawHeaders: string[], keepAliveHintMs: number): boolean {
    const job = this.job!;
    this.phase = Phase.Body;
    this.keepAliveMs = keepAliveHintMs > 0 ? Math.min(keepAliveHintMs - HINT_MARGIN_MS, MAX_IDLE_MS) : IDLE_DEFAULT_MS;
    if (job.handler.onHeaders(status, rawHeaders, this.resume, statusText) === false) this.pause();
    return !this.paused && !job.done;
  }

  onBody(chunk: Buffer): boolean {
    const job = this.job;
    if (job === undefined || job.done) return false;
    if (chunk.length === 0) return true;
    if (job.handler.onData!(chunk) === false) {
      this.pause();
      return false;
    }
    return !this.paused;
  }

  onEnd(trailers: string[]): void {
    const job = this.job!;
    this.job = undefined;
    job.conn = undefined;
    job.done = true;
    this.served++;
    const reusable = this.parser!.keepAlive && this.keepAliveMs >= 1_000 && !this.dead;
    this.parser = undefined;
    this.rest = undefined;
    if (this.paused) {
      this.paused = false;
      this.socket.resume();
    }
    if (reusable) this.pool.release(this);
    else {
      this.dead = true;
      this.socket.destroy();
      this.pool.removed(this);
    }
    job.handler.onComplete(trailers);
  }

  private pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  private resumeBody(): void {
    if (!this.paused || this.dead) return;
    this.paused = false;
    this.lastTick = this.pool.tick;
    const rest = this.rest;
    this.rest = undefined;
    if (rest !== undefined && this.job !== undefined) this.consume(rest);
    if (this.paused || this.dead) return;
    if (this.job !== undefined && this.parser !== undefined && this.socket.readableEnded) {
      if (!this.parser.finish()) this.socket.destroy();
      return;
    }
    this.socket.resume();
  }

  /** Called by the sweep: fails the job if its phase timed out. */
  sweep(tick: number, now: number): void {
    const idleTicks = tick - this.lastTick;
    const p = this.pool;
    switch (this.phase) {
      case Phase.Connecting:
        if ((idleTicks - 1) * p.tickMs >= p.options.connectTimeoutMs)
          this.failOrKill(new H1Error('Connect Timeout Error', 'UND_ERR_CONNECT_TIMEOUT'));
        break;
      case Phase.Head:
        if ((idleTicks - 1) * p.tickMs >= p.options.firstByteTimeoutMs)
          this.fail(new H1Error('Headers Timeout Error', 'UND_ERR_HEADERS_TIMEOUT'));
        break;
      case Phase.Body:
        if (this.paused) this.lastTick = tick;
        else if ((idleTicks - 1) * p.tickMs >= p.options.idleTimeoutMs)
          this.fail(new H1Error('Body Timeout Error', 'UND_ERR_BODY_TIMEOUT'));
        break;
      case Phase.Idle:
        if (now >= this.idleUntil) {
          this.dead = true;
          this.socket.destroy();
          p.removed(this);
        }
        break;
    }
  }

  private failOrKill(error: Error): void {
    if (this.job !== undefined) {
      this.fail(error);
      return;
    }
    // No job is bound to a connecting socket: removed() fails the oldest waiting one with `error`.
    this.error = error;
    this.dead = true;
    this.socket.destroy();
    this.pool.removed(this);
  }

  becomeIdle(now: number): void {
    this.phase = Phase.Idle;
    this.idleUntil = now + this.keepAliveMs;
    this.socket.unref();
  }

  /** Still connecting (no job is bound to a connecting socket). */
  get connecting(): boolean {
    return this.phase === Phase.Connecting;
  }
}

/** What a socket asks of its pool (H1Pool implements it). */
export interface ConnPool {
  readonly tick: number;
  readonly tickMs: number;
  readonly options: { connectTimeoutMs: number; firstByteTimeoutMs: number; idleTimeoutMs: number };
  /** A fresh socket connected: give it a job, or make it idle. */
  connectedOne(conn: Conn): void;
  /** A socket finished its job and may be reused. */
  release(conn: Conn): void;
  /** A socket is gone (closed, dead): forget it. */
  removed(conn: Conn): void;
  /** A request to retry once on a fresh socket. */
  requeueFresh(job: Job): void;
  /** The job's terminal failure (once). */
  finishJob(job: Job, error: Error): void;
  /** The caller's abort (the function given to onConnect). */
  abort(job: Job, error?: Error): void;
}
