/**
 * Finished requests' spans on their way out (an item is one request's records, or several
 * requests' spans already encoded: add() says how many requests it holds): queued as they end,
 * sent in batches by a sender (OTLP/HTTP, or an embedder's SpanExporter) once a second or as soon
 * as a batch is full, at most MAX_SENDING batches at once.
 *
 * Bounded: past `maxQueued` requests waiting (the collector slower than the traffic, or down), a
 * request's spans are dropped and counted, and one warning says so per minute; the proxy's memory
 * and latency never depend on the collector. close() sends what is queued, then waits for it.
 */
/** Sends one batch; resolves when the collector took it, rejects with why not. */
export type TraceSender<T> = (batch: T[]) => Promise<void>;

export interface TraceBatchOptions {
  /** Requests per batch (default 1,024: about 3,000 spans). */
  maxBatch?: number;
  /** Requests that may wait (default 16,384); past it they are dropped. */
  maxQueued?: number;
  /** The longest a finished request waits for its batch, ms (default 1,000). */
  delayMs?: number;
  /** Called before each timed flush and at close(): a caller holding requests back adds them then. */
  drain?: () => void;
  warn(line: string): void;
}

const MAX_SENDING = 2;
const WARN_EVERY_MS = 60_000;

export class TraceBatch<T> {
  private queue: T[] = [];
  /** How many requests each queued item holds, and their sum. */
  private counts: number[] = [];
  private queued = 0;
  private readonly sending = new Set<Promise<void>>();
  private readonly timer: NodeJS.Timeout;
  private readonly maxBatch: number;
  private readonly maxQueued: number;
  private lastWarning = -Infinity;
  private closed = false;
  /** Requests whose spans were dropped (queue full), and batches the collector refused. */
  dropped = 0;
  failedBatches = 0;

  constructor(
    private readonly send: TraceSender<T>,
    private readonly options: TraceBatchOptions,
  ) {
    this.maxBatch = options.maxBatch ?? 1024;
    this.maxQueued = options.maxQueued ?? 16_384;
    this.timer = setInterval(() => {
      this.options.drain?.();
      this.flush();
    }, options.delayMs ?? 1000);
    this.timer.unref();
  }

  /** An item of `requests` requests' spans (bound, so it can be handed out as a callback). */
  readonly add = (item: T, requests = 1): void => {
    if (this.closed) return;
    if (this.queued + requests > this.maxQueued) {
      this.dropped += requests;
      this.warnAtMost(`${this.dropped} requests' spans dropped: the trace exporter cannot keep up`);
      return;
    }
    this.queue.push(item);
    this.counts.push(requests);
    this.queued += requests;
    if (this.queued >= this.maxBatch && this.sending.size < MAX_SENDING) this.flush();
  };

  /** Sends full batches while fewer than MAX_SENDING are in flight, and then what is left. */
  private flush(): void {
    while (this.queue.length > 0 && this.sending.size < MAX_SENDING) {
      // The first items holding up to maxBatch requests (at least one item).
      let items = 0;
      let requests = 0;
      while (items < this.queue.length && (items === 0 || requests + this.counts[items]! <= this.maxBatch))
        requests += this.counts[items++]!;
      const batch = this.queue.slice(0, items);
      this.queue = this.queue.slice(items);
      this.counts = this.counts.slice(items);
      this.queued -= requests;
      const sent: Promise<void> = this.send(batch)
        .catch((error: unknown) => {
          this.failedBatches++;
          this.warnAtMost(`exporting ${requests} requests' spans failed: ${(error as Error).message}`);
        })
        .finally(() => {
          this.sending.delete(sent);
          if (this.queued >= this.maxBatch) this.flush();
        });
      this.sending.add(sent);
    }
  }

  private warnAtMost(line: string): void {
    const at = Date.now();
    if (at - this.lastWarning < WARN_EVERY_MS) return;
    this.lastWarning = at;
    this.options.warn(`kvroute proxy: tracing: ${line}`);
  }

  /** Sends everything queued and waits for it; later spans are ignored. */
  async close(): Promise<void> {
    this.options.drain?.();
    this.closed = true;
    clearInterval(this.timer);
    while (this.queue.length > 0 || this.sending.size > 0) {
      this.flush();
      await Promise.race(this.sending);
    }
  }
}
