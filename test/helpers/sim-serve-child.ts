/**
 * `kvroute sim serve` as a child process for end-to-end tests: started from dist/cli.js on free
 * loopback ports, its engine URLs read from stdout, stopped with SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { childStopper } from './child-stop.js';

export interface SimServeChild {
  child: ChildProcess;
  urls: string[];
  /** SIGTERM, then the exit code; SIGKILL if it has not exited after `graceMs`. */
  stop(graceMs?: number): Promise<number | null>;
}

/** Starts `kvroute sim serve --port 0 --instances N …args` and waits (≤ 20 s) for its N URLs. */
export async function startSimServe(instances: number, args: string[] = []): Promise<SimServeChild> {
  const cli = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));
  const child = spawn(
    process.execPath,
    [cli, 'sim', 'serve', '--instances', String(instances), '--port', '0', ...args],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const stop = childStopper(child, 10_000);
  try {
    let stdout = '';
    const urls = await new Promise<string[]>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no URLs in 20 s: ${stdout}`)), 20_000);
      child.once('exit', (code) => reject(new Error(`sim serve exited early (${code}): ${stdout}`)));
      child.stdout!.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        const found = stdout.match(/http:\/\/127\.0\.0\.1:\d+/g) ?? [];
        if (found.length === instances) {
          clearTimeout(timer);
          resolve(found);
        }
      });
    });
    return { child, urls, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
