/** Builds a native Router and its TypeScript-reference twin with one configuration. */
import { Router } from '../../src/index.js';
import type { RouterOptions } from '../../src/index.js';

export function twins(options: Omit<RouterOptions, 'native'>): { native: Router; reference: Router } {
  return { native: new Router({ ...options, native: true }), reference: new Router({ ...options, native: false }) };
}

/** Runs a body against each implementation: describe.each(IMPLEMENTATIONS). */
export const IMPLEMENTATIONS = [
  { impl: 'native', native: true },
  { impl: 'reference', native: false },
] as const;

/** Stats without the fields only the native core reports. */
export function comparableStats(router: Router) {
  const stats = router.stats();
  return {
    ...stats,
    native: undefined,
    fleetBytes: undefined,
    instances: stats.instances.map((s) => ({ ...s, segments: undefined, bytes: undefined })),
  };
}

/** Calls fn and returns the error it throws (fails if it does not throw). */
export function thrown(fn: () => unknown): Error & { code?: string } {
  try {
    fn();
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error('expected a throw');
}
