/**
 * Carries a thread's observer calls to the primary, which replays them into its own observers, so
 * /metrics, the dashboard and the request log show one process (docs/scale-out.md).
 *
 * The thread side batches: a call is one array pushed on a list; the list goes out by postMessage
 * every FLUSH_MS, or at once when it reaches FLUSH_CALLS (a structured clone per batch, not per
 * call). Observers on the primary hear a thread's calls up to FLUSH_MS late, in the thread's
 * order; calls of different threads interleave by batch.
 *
 * Invariant: flush() sends everything pushed before it, so a thread that flushes before it exits
 * loses nothing.
 *
 * A batch also carries the thread's in-flight counts, and its flow control report (queue and
 * drawn buckets, thread-flow.ts) on the first flush and then at most every FLOW_REPORT_MS: the
 * dashboard reads it about once a second, and a report costs O(tenants waiting or drawn). Its V8
 * heap's size (thread-metrics.ts) goes on the first flush and then at most every HEAP_REPORT_MS
 * (a reading costs a few µs; Prometheus scrapes every few seconds).
 */
import v8 from 'node:v8';

import type { ProxyObserver } from '../observe/proxy-observer.js';
import type { FlowReport } from './thread-flow.js';
import type { HeapReport, ObservedCall, ToPrimary } from './thread-messages.js';

const FLUSH_MS = 20;
const FLUSH_CALLS = 2048;
const FLOW_REPORT_MS = 250;
const HEAP_REPORT_MS = 1000;

/** Every ProxyObserver method a relay forwards (onRequest only when asked: records cost a clone each). */
const METHODS = [
  'onRouted',
  'onFirstByte',
  'onFinished',
  'onUpstreamError',
  'onRetry',
  'onBackendHealth',
  'onOffload',
  'onOffloadTransfer',
  'onFlow',
  'onFlowOutput',
] as const;

export class ObserverRelay {
  readonly observer: ProxyObserver;
  private calls: ObservedCall[] = [];
  private readonly timer: NodeJS.Timeout;
  private flowReportedAt = -Infinity;
  private heapReportedAt = -Infinity;

  constructor(
    private readonly post: (message: ToPrimary) => void,
    /** The in-flight requests per backend, sent with each batch (the primary's gauges add them). */
    private readonly inFlight: () => Record<string, number>,
    records: boolean,
    /** The thread's flow control now (thread-flow.ts reportFlow); absent: never sent. */
    private readonly flow?: () => FlowReport,
  ) {
    const observer: Record<string, (...args: unknown[]) => void> = {};
    for (const method of records ? [...METHODS, 'onRequest'] : METHODS)
      observer[method] = (...args: unknown[]) => {
        this.calls.push([method, ...args]);
        if (this.calls.length >= FLUSH_CALLS) this.flush();
      };
    this.observer = observer as ProxyObserver;
    this.timer = setInterval(() => this.flush(), FLUSH_MS);
    this.timer.unref();
  }

  flush(): void {
    const message: ToPrimary = { type: 'observed', calls: this.calls, inFlight: this.inFlight() };
    this.calls = [];
    const now = performance.now();
    if (this.flow !== undefined && now - this.flowReportedAt >= FLOW_REPORT_MS) {
      this.flowReportedAt = now;
      message.flow = this.flow();
    }
    if (now - this.heapReportedAt >= HEAP_REPORT_MS) {
      this.heapReportedAt = now;
      message.heap = heapReport();
    }
    this.post(message);
  }

  close(): void {
    clearInterval(this.timer);
    this.flush();
  }
}

/** This thread's V8 heap now. */
export function heapReport(): HeapReport {
  const heap = v8.getHeapStatistics();
  return { usedBytes: heap.used_heap_size, totalBytes: heap.total_heap_size };
}

/** The primary's side: replays a batch into `observer` (an ObserverList, which survives a throwing observer). */
export function replayObserved(observer: ProxyObserver, calls: readonly ObservedCall[]): void {
  const target = observer as unknown as Record<string, ((...args: unknown[]) => void) | undefined>;
  for (const [method, ...args] of calls) target[method]?.(...args);
}
