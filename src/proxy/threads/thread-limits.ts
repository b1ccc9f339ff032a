/**
 * The per-process limits of `kvroute serve`, over its threads (docs/scale-out.md):
 * - `--max-in-flight` and `--queue-size` are the process's: one slot count in shared memory
 *   (`flowSlots`, slot-counter.ts) and one queue, the main thread's (flow-hub.ts);
 * - `--max-body-memory` is divided evenly (rounded up; 0, "none", stays 0): each thread buffers
 *   on its own;
 * - flow control's rate limits too (`flowShare`: each thread enforces 1/N of every tenant's,
 *   connections spreading evenly over threads).
 */
import { SharedSlots } from '../../flow/slot-counter.js';
import { PROXY_DEFAULTS, type ProxyOptions } from '../proxy-options.js';

const share = (total: number, threads: number): number => (total === 0 ? 0 : Math.max(1, Math.ceil(total / threads)));

export function perThreadLimits<T extends Pick<ProxyOptions, 'maxInFlight' | 'maxBodyMemoryBytes'>>(
  options: T,
  threads: number,
): T & { flowShare?: number; flowSlots?: SharedArrayBuffer } {
  if (threads <= 1) return options;
  const limited = (options.maxInFlight ?? PROXY_DEFAULTS.maxInFlight) > 0;
  return {
    ...options,
    flowShare: 1 / threads,
    ...(limited ? { flowSlots: new SharedArrayBuffer(SharedSlots.bytesFor(threads)) } : {}),
    maxBodyMemoryBytes: share(options.maxBodyMemoryBytes ?? PROXY_DEFAULTS.maxBodyMemoryBytes, threads),
  };
}
