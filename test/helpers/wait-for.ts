/**
 * Bounded waits for tests: a test waits for the condition it needs, never for a fixed time.
 *
 * - `waitFor(what, probe)` polls `probe` (sync or async) until it returns a truthy value, and
 *   resolves with that value; after `timeoutMs` it rejects with an error naming `what` and, when
 *   `detail` is given, the state it last saw. A probe that throws fails the wait at once (a bug,
 *   not a condition still to come).
 * - `within(what, promise)` settles with `promise`, or rejects naming `what` after `timeoutMs`.
 *
 * Hazards: the timeout is a bound for a machine under load, not a performance target: keep it
 * generous (seconds) and assert timing nowhere. A probe with side effects (a request, a route)
 * runs once per poll; make each poll leave the state as it found it.
 */

export interface WaitOptions {
  /** Give up after this long (default 10 s). */
  timeoutMs?: number;
  /** Pause between polls (default 10 ms). */
  intervalMs?: number;
  /** What was last seen, for the timeout's message. */
  detail?: () => unknown;
}

/** What a probe returns when its condition holds. */
export type Truthy<T> = Exclude<T, false | 0 | '' | null | undefined>;

/** Polls `probe` until it returns a truthy value; rejects naming `what` after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => T | Promise<T>,
  { timeoutMs = 10_000, intervalMs = 10, detail }: WaitOptions = {},
): Promise<Truthy<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value as Truthy<T>;
    if (Date.now() >= deadline) {
      const seen = detail === undefined ? '' : `; last seen: ${JSON.stringify(detail())}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${seen}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Settles with `promise`, or rejects naming `what` after `timeoutMs` (default 10 s). */
export async function within<T>(what: string, promise: Promise<T>, timeoutMs = 10_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
