/**
 * What the threads of one `kvroute serve --threads N` process tell each other (docs/scale-out.md).
 *
 * The main thread (the primary) owns the control plane: health probes, model discovery, the admin
 * API, KV event feeds, metrics, the dashboard and the request log. Every thread, the primary
 * included, serves completion requests on the shared port and routes them with the one shared
 * routing core. So:
 * - primary → thread: ThreadState, whenever it changed (backends, health, models, policy), so a
 *   thread names the core's slots and answers /ready and /v1/models as the primary would;
 *   `close` to shut down.
 * - thread → primary: a backend that failed before its first byte (`trip`: the thread has already
 *   taken it out of the shared core; the primary opens its breaker and probes it back), and
 *   batches of observer calls (`observed`) with the thread's in-flight counts (and now and then
 *   its flow control queue and buckets), which the primary replays into its one set of metrics,
 *   dashboard and request log.
 * - flow control (`flow-*`, with `--max-in-flight`): the primary owns the one queue; a thread
 *   asks it for a slot it cannot take on its own and hears back (thread-admission.ts, flow-hub.ts).
 *
 * Everything here is structured-clone data.
 */
import type { RouterMirror } from '../../core/router.js';
import type { FlowConfig } from '../../flow/flow-config.js';
import type { FlowEntry } from '../../flow/flow-controller.js';
import type { ModelCard } from '../upstream/backend.js';
import type { FlowReport } from './thread-flow.js';

/** One backend as the primary sees it. */
export interface ThreadBackend {
  id: string;
  /** The discovered (or configured) models; undefined while unknown (it takes any model). */
  models: ModelCard[] | undefined;
  healthy: boolean;
  drained: boolean;
  failures: number;
  lastFailure: string;
}

export interface ThreadState {
  router: RouterMirror;
  backends: ThreadBackend[];
  /** Some backend has a KV event endpoint: token-id prompts are keyed by tokens too. */
  eventFed: boolean;
  /** Flow control's config, whole-process limits (each thread enforces its share). */
  flow: FlowConfig;
  /** The main thread's extra /ready detail (its cluster link), when it has one. */
  readyDetail?: Record<string, unknown>;
}

/** An observer call: the ProxyObserver method's name and its arguments. */
export type ObservedCall = [method: string, ...args: unknown[]];

/** Flow control's messages, thread → main (thread-admission.ts → flow-hub.ts). */
export type FlowToPrimary =
  /** A request the thread let in past shedding and its rate limits, for the one queue (a plain FlowEntry). */
  | { type: 'flow-enter'; id: number; entry: FlowEntry }
  /** A request the main thread admitted gave its slot back. */
  | { type: 'flow-leave'; tenant: string; inputTokens: number }
  | { type: 'flow-cancel'; id: number }
  /**
   * Slots the thread took and gave back on its own, net by tenant ([tenant, slots, tokens]), and
   * `kick`: one was given back while requests waited, so the main thread admits the next.
   */
  | { type: 'flow-held'; deltas: Array<[string, number, number]>; kick: boolean };

/** Flow control's messages, main → thread. */
export type FlowToThread =
  | { type: 'flow-admit'; id: number; tenant: string; inputTokens: number }
  | { type: 'flow-refuse'; id: number; status: number; message: string; code: string; retryAfterSeconds: number };

/** A thread's V8 heap: in use, and as committed (v8.getHeapStatistics used_heap_size, total_heap_size). */
export interface HeapReport {
  usedBytes: number;
  totalBytes: number;
}

export type ToThread = { type: 'state'; state: ThreadState } | { type: 'close'; graceMs: number } | FlowToThread;

export type ToPrimary =
  | { type: 'listening' }
  | { type: 'trip'; id: string; why: string }
  | {
      type: 'observed';
      calls: ObservedCall[];
      inFlight: Record<string, number>;
      /** The thread's flow control queue and drawn buckets, at most every FLOW_REPORT_MS (thread-flow.ts). */
      flow?: FlowReport;
      /** The thread's V8 heap, at most every HEAP_REPORT_MS (observer-relay.ts). */
      heap?: HeapReport;
    }
  | { type: 'closed' }
  | FlowToPrimary;
