/**
 * The metrics of `kvroute serve --threads N` itself (docs/scale-out.md): requests finished per
 * thread (thread 0 is the main one), so an operator sees the kernel spreading connections; each
 * thread's V8 heap (Node's own `nodejs_heap_size_*_bytes` are the main thread's alone); and the
 * shared routing core's lock: calls that held it and calls that had to wait for it, the measured
 * contention between threads.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

import type { ProxyObserver } from '../observe/proxy-observer.js';
import { heapReport } from './observer-relay.js';
import type { HeapReport } from './thread-messages.js';

/**
 * The main thread's heap is read once for both heap gauges of a scrape (their collects run
 * microseconds apart), so a scrape's in-use and committed figures come from one reading.
 */
const MAIN_HEAP_REUSE_MS = 100;

export class ThreadMetrics {
  private readonly finished: number[];
  /** Each thread's last heap report (thread 0, the main one, is read at each scrape). */
  private readonly heaps: (HeapReport | undefined)[];
  /** Counts the main thread's own finished requests. */
  readonly observer: ProxyObserver;

  constructor(registry: Registry, lock: () => { ops: number; contended: number }, threads: number) {
    this.finished = new Array<number>(threads).fill(0);
    this.observer = { onFinished: () => void this.finished[0]!++ };
    const finished = this.finished;
    this.heaps = new Array<HeapReport | undefined>(threads).fill(undefined);
    const heaps = this.heaps;
    let mainReadAt = -Infinity;
    const readMainHeap = () => {
      const now = performance.now();
      if (now - mainReadAt < MAIN_HEAP_REUSE_MS) return;
      mainReadAt = now;
      heaps[0] = heapReport();
    };
    new Counter({
      name: 'kvroute_thread_requests_total',
      help: 'Completion requests finished, by the thread that served them (0: the main thread).',
      labelNames: ['thread'] as const,
      registers: [registry],
      collect() {
        this.reset();
        finished.forEach((n, thread) => this.inc({ thread: String(thread) }, n));
      },
    });
    const heapGauge = (name: string, help: string, bytes: (heap: HeapReport) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['thread'] as const,
        registers: [registry],
        collect() {
          this.reset();
          readMainHeap();
          heaps.forEach((heap, thread) => heap !== undefined && this.set({ thread: String(thread) }, bytes(heap)));
        },
      });
    heapGauge(
      'kvroute_thread_heap_used_bytes',
      "Each thread's V8 heap in use (0: the main thread; another thread's as it last reported, within a second).",
      (heap) => heap.usedBytes,
    );
    heapGauge(
      'kvroute_thread_heap_total_bytes',
      "Each thread's V8 heap as committed (0: the main thread; another thread's as it last reported, within a second).",
      (heap) => heap.totalBytes,
    );
    new Counter({
      name: 'kvroute_router_lock_calls_total',
      help: 'Calls into the routing core shared by the threads (each holds its lock).',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(lock().ops);
      },
    });
    new Counter({
      name: 'kvroute_router_lock_waits_total',
      help: 'Calls into the shared routing core that found its lock taken by another thread and waited.',
      registers: [registry],
      collect() {
        this.reset();
        this.inc(lock().contended);
      },
    });
  }

  /** Another thread's heap, as it reported it. */
  heap(thread: number, report: HeapReport): void {
    this.heaps[thread] = report;
  }

  /** Another thread's batch finished `n` requests. */
  add(thread: number, n: number): void {
    this.finished[thread] = (this.finished[thread] ?? 0) + n;
  }
}
