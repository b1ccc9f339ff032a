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
 * Abort: the function given to onConnect destroys the socket and calls onError once with
 * UND_ERR_ABORTED; after any terminal callback no further callback is made.
 *
 * One socket and the request on it (writing, parsing, backpressure, keep-alive hazards and the
 * one invisible retry of a request a reused socket lost) are h1-connection.ts's; this file keeps
 * the sockets, the queues, the sweep and shutdown.
 */
import { Conn, H1Error, Job, type ConnPool, type H1DispatchOptions, type H1Handler } from './h1-connection.js';

/** Coarsest sweep period. */
const TICK_MS = 250;

export interface H1PoolOptions {
  connections: number;
  connectTimeoutMs: number;
  firstByteTimeoutMs: number;
  idleTimeoutMs: number;
}

/** The hot-path pool for one backend origin (http: only). */
export class H1Pool implements ConnPool {
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
  dispatch(opts: H1DispatchOptions, handler: H1Handler): boolean {
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
    if (conn.connecting && conn.job === undefined) {
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
