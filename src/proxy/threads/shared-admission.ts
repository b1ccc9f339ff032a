/**
 * Which admission a proxy gets (docs/flow-control.md "Threads"): its own (one thread), or, under
 * `kvroute serve --threads N` with `--max-in-flight`, the main thread's, which owns the process's
 * one queue and answers the others (flow-hub.ts), or a thread's, which asks it
 * (thread-admission.ts). The slot count is shared memory (`flowSlots`, thread-limits.ts).
 */
import type { Router } from '../../core/router.js';
import type { FlowConfig } from '../../flow/flow-config.js';
import { SharedSlots } from '../../flow/slot-counter.js';
import { Admission, type AdmissionLimits } from '../exchange/admission.js';
import { ThreadAdmission } from './thread-admission.js';
import type { FlowToPrimary } from './thread-messages.js';

export interface AdmissionOptions extends AdmissionLimits {
  /** Flow control's tenants, classes and limits (src/flow/), for the whole process. */
  flow: FlowConfig;
  /** This proxy's share of the process's traffic (1/N under `--threads N`): rate limits are scaled by it. */
  flowShare?: number | undefined;
}

export function createAdmission(
  options: AdmissionOptions,
  /** A thread's index (1…N−1) and way to the main thread; undefined in the main thread (or the only one). */
  thread: { index: number; onFlow(message: FlowToPrimary): void } | undefined,
  router: () => Router,
): Admission {
  const share = options.flowShare ?? 1;
  if (options.flowSlots === undefined) return new Admission(options, options.flow, share, router);
  if (thread === undefined)
    return new Admission(options, options.flow, share, router, new SharedSlots(options.flowSlots));
  const slots = new SharedSlots(options.flowSlots, thread.index);
  return new ThreadAdmission(options, options.flow, share, router, slots, (message) => thread.onFlow(message));
}
