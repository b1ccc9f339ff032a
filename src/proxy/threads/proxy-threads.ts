/**
 * The main thread's side of `kvroute serve --threads N` (docs/scale-out.md): starts the N − 1
 * extra proxy threads (proxy-thread.ts), keeps them in step with the main thread's state, hears
 * their backend failures and observer calls, and stops them.
 *
 * - State: every SYNC_MS the main thread's ThreadState is compared with the last one sent, and
 *   sent to every thread when it changed (a backend added, removed, tripped, recovered, drained;
 *   models discovered; the policy switched). A thread's view of health and models is so at most
 *   SYNC_MS stale; routing never is, because the routable set lives in the shared core.
 * - Failures: a thread's `trip` is the main thread's reportFailure(): its breaker opens and its
 *   probes bring the backend back (the thread has already taken it out of the shared core).
 * - Observers: a thread's batches are replayed into the main thread's observers, its in-flight
 *   counts join the main thread's gauges, and its flow control reports the process's flow view
 *   (ProxyState.flowNow, thread-flow.ts).
 * - Flow control: with --max-in-flight the main thread owns the one queue; its FlowHub answers
 *   the threads' requests for slots (flow-hub.ts).
 * - Shutdown: close() sends `close` with the grace period; each thread finishes its open requests,
 *   flushes and exits; one that has not exited GRACE_SLACK_MS after the grace is terminated.
 */
import { isDeepStrictEqual } from 'node:util';
import { Worker } from 'node:worker_threads';

import type { ProxyObserver } from '../observe/proxy-observer.js';
import type { Proxy } from '../server/proxy-server.js';
import { SharedSlots } from '../../flow/slot-counter.js';
import { FlowHub } from './flow-hub.js';
import { replayObserved } from './observer-relay.js';
import type { ThreadMetrics } from './thread-metrics.js';
import type { ThreadData } from './proxy-thread.js';
import type { FlowToPrimary, ThreadState, ToPrimary, ToThread } from './thread-messages.js';

/** proxy-thread.ts, built: under vitest this module is a .ts file, and a worker cannot load one. */
const THREAD_URL = import.meta.url.endsWith('.ts')
  ? new URL('../../../dist/proxy/threads/proxy-thread.js', import.meta.url)
  : new URL('./proxy-thread.js', import.meta.url);

const SYNC_MS = 50;
const GRACE_SLACK_MS = 2_000;

export interface ProxyThreadsOptions {
  /** Extra threads to start (`--threads N` starts N − 1; the main thread is the first). */
  count: number;
  /** The main thread's proxy: its router must be native and not yet shared. */
  proxy: Proxy;
  options: ThreadData['options'];
  host: string;
  /** The port the main thread listens on (with reusePort). */
  port: number;
  /** The main thread's control listener (proxy.listenControl()). */
  controlPort: number;
  /** The main thread's observers, which replay the threads' calls. */
  observer: ProxyObserver;
  /** Relay whole request records (a request log is kept). */
  records: boolean;
  /** Counts each thread's finished requests. */
  metrics?: ThreadMetrics;
}

export class ProxyThreads {
  private readonly workers: Worker[] = [];
  private readonly exited: Promise<void>[] = [];
  private lastState: ThreadState;
  private readonly timer: NodeJS.Timeout;
  private closing: Promise<void> | undefined;
  /** The one queue's answers to the threads (with --max-in-flight: options.flowSlots). */
  private readonly flow: FlowHub | undefined;

  private constructor(private readonly o: ProxyThreadsOptions) {
    const attach = o.proxy.router.share();
    const flowSlots = o.options.flowSlots;
    this.flow =
      flowSlots === undefined
        ? undefined
        : new FlowHub(o.proxy.state.admission, new SharedSlots(flowSlots), (thread, message) =>
            this.workers[thread - 1]?.postMessage(message),
          );
    this.lastState = o.proxy.state.threadState();
    const data: Omit<ThreadData, 'state' | 'index'> = {
      attach,
      options: o.options,
      host: o.host,
      port: o.port,
      controlOrigin: `http://127.0.0.1:${o.controlPort}`,
      records: o.records,
    };
    for (let k = 0; k < o.count; k++) {
      const thread = k + 1;
      const worker = new Worker(THREAD_URL, {
        workerData: { ...data, state: this.lastState, index: thread } satisfies ThreadData,
      });
      worker.on('message', (message: ToPrimary) => this.heard(thread, message));
      this.exited.push(
        new Promise((resolve) =>
          worker.once('exit', () => {
            o.proxy.state.setThreadInFlight(thread, undefined);
            o.proxy.state.threadFlow.set(thread, undefined);
            this.flow?.threadGone(thread);
            resolve();
          }),
        ),
      );
      this.workers.push(worker);
    }
    this.timer = setInterval(() => this.sync(), SYNC_MS);
    this.timer.unref();
  }

  /** Starts the threads; resolves once every one listens on the shared port, else rejects naming why. */
  static async start(options: ProxyThreadsOptions): Promise<ProxyThreads> {
    const threads = new ProxyThreads(options);
    try {
      await Promise.all(
        threads.workers.map(
          (worker, k) =>
            new Promise<void>((resolve, reject) => {
              const fail = (why: string) => reject(new Error(`proxy thread ${k + 1} did not start: ${why}`));
              worker.on('message', (m: ToPrimary) => m.type === 'listening' && resolve());
              worker.once('error', (error) => fail(error.message));
              worker.once('exit', (code) => fail(`it exited with code ${code}`));
            }),
        ),
      );
    } catch (error) {
      await threads.close(0);
      throw error;
    }
    return threads;
  }

  get size(): number {
    return this.workers.length;
  }

  private heard(thread: number, message: ToPrimary): void {
    const state = this.o.proxy.state;
    if (message.type === 'observed') {
      replayObserved(this.o.observer, message.calls);
      this.o.metrics?.add(thread, message.calls.filter((call) => call[0] === 'onFinished').length);
      state.setThreadInFlight(thread, message.inFlight);
      if (message.flow !== undefined) state.threadFlow.set(thread, message.flow);
      if (message.heap !== undefined) this.o.metrics?.heap(thread, message.heap);
    } else if (message.type === 'trip') {
      const backend = state.backend(message.id);
      if (backend !== undefined) state.reportFailure(backend, message.why);
    } else if (message.type.startsWith('flow-')) this.flow?.heard(thread, message as FlowToPrimary);
  }

  private sync(): void {
    const now = this.o.proxy.state.threadState();
    if (isDeepStrictEqual(now, this.lastState)) return;
    this.lastState = now;
    this.send({ type: 'state', state: now });
  }

  private send(message: ToThread): void {
    for (const worker of this.workers) worker.postMessage(message);
  }

  /** Stops every thread: each finishes its open requests within `graceMs`, then exits. */
  close(graceMs: number): Promise<void> {
    this.closing ??= (async () => {
      clearInterval(this.timer);
      this.send({ type: 'close', graceMs });
      const deadline = setTimeout(() => {
        for (const worker of this.workers) void worker.terminate();
      }, graceMs + GRACE_SLACK_MS);
      await Promise.all(this.exited);
      clearTimeout(deadline);
    })();
    return this.closing;
  }
}
