/**
 * A lean HTTP/1.1 keep-alive client for the proxy's hot path (completion POSTs), on node:net.
 *
 * Why: undici's general machinery (its Request objects, kQueue bookkeeping, llhttp through wasm,
 * per-request timers) is a large share of the proxy's CPU per request. This pool does only what
 * the hot path needs and keeps undici's handler contract (Dispatcher.DispatchHandlers: onConnect,
 * onHeaders, onData, onComplete, onError; head fields as latin1 strings instead of Buffers) and
 * its error codes, so one AttemptRelay (exchange/attempt-relay.ts) serves both clients.
 * Health probes and /v1/models keep using undici.
 *
 * Pool: idle sockets on a LIFO stack (the warmest first), at most `connections` sockets
 * (connecting + busy + idle), a FIFO queue when at the cap. One request per socket at a time
 * (no pipelining). The request head and body go out in one write.
 *
 * Timeouts: one coarse interval per pool (TICK_MS or a quarter of the shortest timeout) sweeps the
 * busy and connecting sockets; activity only stores the tick count, so no timer is created per
 * request. connect → UND_ERR_CONNECT_TIMEOUT, no head within firstByteTimeoutMs →
 * UND_ERR_HEADERS_TIMEOUT, a body silent for idleTimeoutMs (not paused by backpressure) →
 * UND_ERR_BODY_TIMEOUT. The interval is unref'd and runs only while the pool has sockets.
 *
 * Keep-alive hazards: a reused socket may have been closed by the server just as a request was
 * written on it. Such a request that gets EOF or a reset before any response byte is retried
 * once on a fresh connection (as Go's and undici's clients do), invisibly to the caller.
 * `Connection: close` and HTTP/1.0 responses are honoured; `Keep-Alive: timeout=N` drops the idle
 * socket a second before N (undici's threshold); without a hint, idle sockets live
 * IDLE_DEFAULT_MS. Sockets that error are dropped; idle sockets are unref'd.
 *
 * Abort: the function given to onConnect destroys the socket and calls onError once with
 * UND_ERR_ABORTED; after any terminal callback no further callback is made.
 */
import { connect, type Socket } from 'node:net';

import type { Dispatcher } from 'undici';

import { ResponseParser, type ResponseSink } from './h1-response-parser.js';

/** Longest a hint-less idle socket is kept (undici's keepAliveTimeout default). */
const IDLE_DEFAULT_MS = 4_000;
/** Subtracted from a server's Keep-Alive timeout hint (undici's keepAliveTimeoutThreshold). */
const HINT_MARGIN_MS = 1_000;
/** Coarsest sweep period. */
const TICK_MS = 250;
/** Longest a hinted idle socket is kept (undici's keepAliveMaxTimeout). */
const MAX_IDLE_MS = 600_000;

export interface H1PoolOptions {
  connections: number;
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
}

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
type Handler = Pick<Dispatcher.DispatchHandlers, 'onConnect' | 'onData' | 'onError'> & {
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

class Job {
  /** Terminal callback made (onComplete or onError). */
  done = false;
  retried = false;
  connected = false;
  conn: Conn | undefined;
  constructor(
    readonly opts: H1DispatchOptions,
    readonly handler: Handler,
  ) {}
}

const enum Phase {
  Connecting,
  Idle,
  /** Request written, waiting for the head. */
  Head,
  Body,
}

class Conn implements ResponseSink {
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
    private readonly pool: H1Pool,
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
}

/** The hot-path pool for one backend origin (http: only). */
export class H1Pool {
  readonly options: H1PoolOptions;
  readonly tickMs: number;
  tick = 0;
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;
  private readonly idle: Conn[] = [];
  private readonly conns = new Set<Conn>();
  /** Requests waiting for a socket, oldest first. */
  private readonly queue: Job[] = [];
  /** Retried requests: they wait for a fresh connection (never a reused one). */
  private readonly retryQueue: Job[] = [];
  /** Sockets still connecting (each will take a waiting request). */
  private connecting = 0;
  private timer: NodeJS.Timeout | undefined;
  private closing = false;
  private destroyed = false;
  private drainedWaiters: Array<() => void> = [];

  constructor(origin: string, options: H1PoolOptions) {
    const url = new URL(origin);
    if (url.protocol !== 'http:') throw new TypeError(`H1Pool speaks http: only, got ${origin}`);
    this.host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port === '' ? 80 : Number(url.port);
    this.hostHeader = url.host;
    this.options = options;
    const shortest = Math.min(options.connectTimeoutMs, options.firstByteTimeoutMs, options.idleTimeoutMs);
    this.tickMs = Math.max(5, Math.min(TICK_MS, Math.floor(shortest / 4)));
  }

  /** Sends one request; the handler hears exactly undici's callbacks. Never throws. */
  dispatch(opts: H1DispatchOptions, handler: Handler): boolean {
    const job = new Job(opts, handler);
    if (this.closing || this.destroyed) {
      const error = this.destroyed
        ? new H1Error('The client is destroyed', 'UND_ERR_DESTROYED')
        : new H1Error('The client is closed', 'UND_ERR_CLOSED');
      queueMicrotask(() => this.finishJob(job, error));
      return false;
    }
    this.assign(job);
    return true;
  }

  private assign(job: Job): void {
    const conn = this.idle.pop();
    if (conn !== undefined) {
      conn.start(job, this.hostHeader);
      return;
    }
    this.queue.push(job);
    this.openForWaiting();
  }

  /** Opens sockets while requests outnumber the sockets connecting for them, up to the cap. */
  private openForWaiting(): void {
    const waiting = this.queue.length + this.retryQueue.length;
    while (this.connecting < waiting && this.conns.size < this.options.connections && !this.destroyed) {
      this.connecting++;
      this.conns.add(new Conn(this, this.host, this.port));
      this.startTimer();
    }
  }

  /** A fresh socket connected: it takes a retried request first, else the oldest waiting one, or goes idle. */
  connectedOne(conn: Conn): void {
    this.connecting--;
    const job = this.retryQueue.shift() ?? this.queue.shift();
    if (job !== undefined) conn.start(job, this.hostHeader);
    else this.release(conn);
  }

  /** A finished socket is free: the next waiting job, or the idle stack. */
  release(conn: Conn): void {
    if (this.closing || this.destroyed) {
      conn.dead = true;
      conn.socket.destroy();
      this.removed(conn);
      return;
    }
    if (this.retryQueue.length > 0 && this.conns.size >= this.options.connections) {
      // At the cap with a retried request waiting for a fresh socket: make room for one.
      conn.dead = true;
      conn.socket.destroy();
      this.removed(conn);
      return;
    }
    const job = this.queue.shift();
    if (job !== undefined) {
      conn.start(job, this.hostHeader);
      return;
    }
    conn.becomeIdle(Date.now());
    this.idle.push(conn);
  }

  removed(conn: Conn): void {
    if (!this.conns.delete(conn)) return;
    const at = this.idle.indexOf(conn);
    if (at >= 0) this.idle.splice(at, 1);
    // A socket that failed to connect: the request it would have taken gets the error.
    if (conn.phase === Phase.Connecting && conn.job === undefined) {
      this.connecting--;
      const job = this.retryQueue.shift() ?? this.queue.shift();
      if (job !== undefined) this.finishJob(job, conn.error ?? new H1Error('other side closed', 'UND_ERR_SOCKET'));
    }
    this.openForWaiting();
    if (this.conns.size === 0) this.stopTimer();
    this.checkDrained();
  }

  requeueFresh(job: Job): void {
    if (this.destroyed) {
      this.finishJob(job, new H1Error('The client is destroyed', 'UND_ERR_DESTROYED'));
      return;
    }
    this.retryQueue.push(job);
    this.openForWaiting();
  }

  finishJob(job: Job, error: Error): void {
    if (job.done) return;
    job.done = true;
    const at = this.queue.indexOf(job);
    if (at >= 0) this.queue.splice(at, 1);
    const retryAt = this.retryQueue.indexOf(job);
    if (retryAt >= 0) this.retryQueue.splice(retryAt, 1);
    job.handler.onError!(error);
    this.checkDrained();
  }

  abort(job: Job, error?: Error): void {
    if (job.done) return;
    const conn = job.conn;
    const reason = error ?? new H1Error('Request aborted', 'UND_ERR_ABORTED');
    if (conn !== undefined) conn.fail(reason);
    else this.finishJob(job, reason);
  }

  // ---- timers --------------------------------------------------------------------------------

  private startTimer(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => this.sweep(), this.tickMs);
    this.timer.unref();
  }

  private stopTimer(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  private sweep(): void {
    const tick = ++this.tick;
    const now = Date.now();
    for (const conn of [...this.conns]) conn.sweep(tick, now);
  }

  // ---- shutdown ------------------------------------------------------------------------------

  private busy(): number {
    let n = this.queue.length + this.retryQueue.length;
    for (const conn of this.conns) if (conn.job !== undefined) n++;
    return n;
  }

  private checkDrained(): void {
    if (!this.closing || this.busy() > 0) return;
    for (const conn of [...this.idle]) {
      conn.dead = true;
      conn.socket.destroy();
      this.removed(conn);
    }
    const waiters = this.drainedWaiters;
    this.drainedWaiters = [];
    for (const w of waiters) w();
  }

  /** Takes no new requests; resolves when in-flight and queued ones have finished (then closes sockets). */
  close(): Promise<void> {
    this.closing = true;
    return new Promise((resolve) => {
      this.drainedWaiters.push(resolve);
      this.checkDrained();
    });
  }

  /** Cuts every request (UND_ERR_DESTROYED) and socket. */
  destroy(): Promise<void> {
    this.closing = true;
    this.destroyed = true;
    const error = new H1Error('The client is destroyed', 'UND_ERR_DESTROYED');
    for (const job of [...this.retryQueue.splice(0), ...this.queue.splice(0)]) this.finishJob(job, error);
    for (const conn of [...this.conns]) {
      if (conn.job !== undefined) conn.fail(error);
      else {
        conn.dead = true;
        conn.socket.destroy();
        this.removed(conn);
      }
    }
    this.stopTimer();
    this.checkDrained();
    return Promise.resolve();
  }
}
