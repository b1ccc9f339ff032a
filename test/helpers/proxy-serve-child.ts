/**
 * `kvroute serve` as a child process: started from dist/cli.js, its address read from the one
 * `kvroute serve: listening on http://HOST:PORT` stdout line, stopped with SIGTERM (by pid).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { childStopper } from './child-stop.js';

export const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

export interface ServeChild {
  child: ChildProcess;
  base: string;
  stdout(): string;
  stderr(): string;
  /** SIGTERM, then the exit code; SIGKILL if still running after `graceMs`. */
  stop(graceMs?: number): Promise<number | null>;
}

export async function startServe(args: string[], env: NodeJS.ProcessEnv = {}): Promise<ServeChild> {
  const child = spawn(process.execPath, [CLI, 'serve', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const stop = childStopper(child, 15_000);
  try {
    const base = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no listening line in 20 s: ${stdout} ${stderr}`)), 20_000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`serve exited early (${code}): ${stderr}`));
      });
      child.stdout!.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        const match = /^kvroute serve: listening on (http:\/\/\S+)\n/m.exec(stdout);
        if (match !== null) {
          clearTimeout(timer);
          resolve(match[1]!);
        }
      });
    });
    return { child, base, stdout: () => stdout, stderr: () => stderr, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Runs `kvroute serve …` expecting it to fail; resolves with its exit code and stderr. */
export function serveFailure(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CLI, 'serve', ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    }),
  );
}
