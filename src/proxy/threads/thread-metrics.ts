/**
 * The metrics of `kvroute serve --threads N` itself (docs/scale-out.md): requests finished per
 * thread (thread 0 is the main one), so an operator sees the kernel spreading connections, and
 * the shared routing core's lock: calls that held it and calls that had to wait for it, the
 * measured contention between threads.
 */
import { Counter, type Registry } from 'prom-client';

import type { ProxyObserver } from '../observe/proxy-observer.js';

export class ThreadMetrics {
  private readonly finished: number[];
  /** Counts the main thread's own finished requests. */
  readonly observer: ProxyObserver;

  constructor(registry: Registry, lock: () => { ops: number; contended: number }, threads: number) {
    this.finished = new Array<number>(threads).fill(0);
    this.observer = { onFinished: () => void this.finished[0]!++ };
    const finished = this.finished;
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

  /** Another thread's batch finished `n` requests. */
  add(thread: number, n: number): void {
    this.finished[thread] = (this.finished[thread] ?? 0) + n;
  }
}
