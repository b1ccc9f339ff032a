/**
 * The per-process limits of `kvroute serve`, split over its threads (docs/scale-out.md): each
 * thread admits and buffers on its own, so `--max-in-flight`, `--queue-size` and
 * `--max-body-memory` are divided evenly (rounded up; a limit of 0, "none", stays 0), and the
 * process as a whole stays within what the operator set, give or take the rounding. Flow
 * control's rate limits are split the same way (`flowShare`); its queue is each thread's own.
 */
import { PROXY_DEFAULTS, type ProxyOptions } from '../proxy-options.js';

const share = (total: number, threads: number): number => (total === 0 ? 0 : Math.max(1, Math.ceil(total / threads)));

export function perThreadLimits<T extends Pick<ProxyOptions, 'maxInFlight' | 'queueSize' | 'maxBodyMemoryBytes'>>(
  options: T,
  threads: number,
): T & { flowShare?: number } {
  if (threads <= 1) return options;
  return {
    ...options,
    // Flow control's rate limits: each thread enforces 1/N of every tenant's (proxy-state.ts).
    flowShare: 1 / threads,
    maxInFlight: share(options.maxInFlight ?? PROXY_DEFAULTS.maxInFlight, threads),
    queueSize: share(options.queueSize ?? PROXY_DEFAULTS.queueSize, threads),
    maxBodyMemoryBytes: share(options.maxBodyMemoryBytes ?? PROXY_DEFAULTS.maxBodyMemoryBytes, threads),
  };
}
