/** Stopping a child process a test started: SIGTERM, then SIGKILL after a grace period. */
import type { ChildProcess } from 'node:child_process';

/**
 * Returns stop(graceMs): sends SIGTERM (by the child's pid) and resolves with its exit code;
 * SIGKILL follows if it is still running after `graceMs`. Call right after spawn, so the exit
 * is never missed.
 */
export function childStopper(
  child: ChildProcess,
  defaultGraceMs: number,
): (graceMs?: number) => Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return async (graceMs = defaultGraceMs) => {
    if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    const code = await exited;
    clearTimeout(timer);
    return code;
  };
}
