// @ts-check
/**
 * The soak's child processes: every one is started here and kept in one registry, so every path
 * out (a normal end, a thrown error, SIGINT/SIGTERM of the soak itself, its exit) stops each one
 * by its pid: SIGCONT first (a SIGSTOPped engine ignores SIGTERM until continued), then SIGTERM,
 * then SIGKILL after a grace. Nothing is killed by name.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const CLI = join(ROOT, 'dist', 'cli.js');

/** @type {Set<import('node:child_process').ChildProcess>} */
const running = new Set();

/**
 * Starts `node dist/cli.js ...args` and waits (≤ `timeoutMs`) until its stdout matches `ready`.
 * @param {string[]} args
 * @param {RegExp} ready
 * @param {{ env?: NodeJS.ProcessEnv, timeoutMs?: number }} [options]
 * @returns {Promise<{ child: import('node:child_process').ChildProcess, match: RegExpExecArray, stderr: () => string }>}
 */
export async function startCli(args, ready, options = {}) {
  const child = spawn(process.execPath, [CLI, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env },
  });
  running.add(child);
  // One line per child, so a harness that must clean up after a killed soak knows every pid.
  console.error(`soak: child pid ${child.pid} (${args.slice(0, 2).join(' ')})`);
  child.once('exit', () => running.delete(child));
  let stdout = '';
  let stderr = '';
  // stderr is kept bounded: a soak runs for minutes.
  child.stderr?.on('data', (chunk) => (stderr = (stderr + chunk.toString()).slice(-16_384)));
  const timeoutMs = options.timeoutMs ?? 30_000;
  try {
    const match = await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${args.join(' ')}: not ready in ${timeoutMs} ms: ${stderr}`)),
        timeoutMs,
      );
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`${args.slice(0, 2).join(' ')} exited early (${code ?? signal}): ${stderr}`));
      });
      child.stdout?.on('data', (chunk) => {
        if (stdout.length < 65_536) stdout += chunk.toString();
        const found = ready.exec(stdout);
        if (found !== null) {
          clearTimeout(timer);
          resolve(found);
        }
      });
    });
    return { child, match, stderr: () => stderr };
  } catch (error) {
    await stopChild(child);
    throw error;
  }
}

/**
 * SIGCONT, SIGTERM, then SIGKILL after `graceMs`; resolves with the exit code (null: a signal).
 * @param {import('node:child_process').ChildProcess} child
 * @param {number} [graceMs]
 * @returns {Promise<number | null>}
 */
export async function stopChild(child, graceMs = 10_000) {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = once(child, 'exit');
  child.kill('SIGCONT');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  return child.exitCode;
}

/** Stops every child still running, each by its pid. */
export async function stopAll() {
  await Promise.all([...running].map((child) => stopChild(child, 5_000)));
}

/** Synchronous last resort for `process.on('exit')`: SIGKILL whatever is left, by pid. */
export function killAllNow() {
  for (const child of running) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
}
