/**
 * A real nats-server for a test (issue #32): Debian's binary, JetStream on, its store in a fresh
 * temporary directory, on a free loopback port. Tests that need it call `natsServerPath()` first
 * and skip, saying so, when it is absent (`.ci/run` installs it, so CI runs them).
 *
 * Hazard: the server is a child process. Every test that starts one must `stop()` it (by its
 * pid, SIGTERM then SIGKILL) in an afterEach/afterAll or a finally, or the run leaves it behind.
 * `restart()` stops it and starts it again on the same port with the same store, which is how
 * tests take NATS away and bring it back. `diagnose()` is what a failed test prints: the server's
 * last output, and from its monitoring port its JetStream state, connections and goroutine stacks
 * (a server that stops answering shows where it is stuck).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

import { childStopper } from './child-stop.js';
import { freePort, waitListening } from './loopback-port.js';

/** The nats-server binary: on PATH, or Debian's /usr/sbin one; undefined when absent. */
export function natsServerPath(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/bin'];
  for (const dir of dirs) {
    const candidate = join(dir, 'nats-server');
    if (dir !== '' && existsSync(candidate)) return candidate;
  }
  return undefined;
}

/** The message a test prints when it skips for want of nats-server. */
export const NATS_SKIP_REASON =
  'nats-server is not installed (Debian package nats-server; .ci/run installs it): skipped';

export interface NatsServer {
  /** nats://127.0.0.1:PORT */
  readonly url: string;
  readonly port: number;
  /** The running child's pid (changes across restart()). */
  readonly pid: number;
  /** Stops the server (SIGTERM, then SIGKILL after 2 s); its store stays until dispose(). */
  stop(): Promise<void>;
  /** Stops it if running, then starts it again on the same port and store. */
  restart(): Promise<void>;
  /** Stops it and removes its store. */
  dispose(): Promise<void>;
  /** The server's last output and its monitoring endpoints' answers (never throws). */
  diagnose(): Promise<string>;
}

/** Starts nats-server with JetStream on a free loopback port. Throws when the binary is absent. */
export async function startNatsServer(options: { timeoutMs?: number } = {}): Promise<NatsServer> {
  const binary = natsServerPath();
  if (binary === undefined) throw new Error(NATS_SKIP_REASON);
  const store = mkdtempSync(join(tmpdir(), 'kvroute-nats-'));
  const port = await freePort();
  const monitorPort = await freePort();
  const timeoutMs = options.timeoutMs ?? 10_000;
  let child: ChildProcess | undefined;
  let stopChild: ((graceMs?: number) => Promise<number | null>) | undefined;
  let output = '';

  const start = async (): Promise<void> => {
    const started = spawn(
      binary,
      ['-js', '-a', '127.0.0.1', '-p', String(port), '-m', String(monitorPort), '-sd', store],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child = started;
    stopChild = childStopper(started, 2_000);
    const keep = (chunk: Buffer): void => {
      output = (output + chunk.toString()).slice(-4_000);
    };
    started.stdout?.on('data', keep);
    started.stderr?.on('data', keep);
    started.on('exit', (code, signal) =>
      keep(Buffer.from(`[pid ${started.pid} exited: code ${code}, signal ${signal}]\n`)),
    );
    try {
      await waitListening(port, started, 'nats-server', timeoutMs);
    } catch (error) {
      await stopChild();
      throw new Error(`${(error as Error).message}\n${output}`, { cause: error });
    }
  };
  const stop = async (): Promise<void> => {
    await stopChild?.();
  };
  await start();
  return {
    url: `nats://127.0.0.1:${port}`,
    port,
    get pid() {
      return child?.pid ?? -1;
    },
    stop,
    restart: async () => {
      await stop();
      await start();
    },
    dispose: async () => {
      await stop();
      rmSync(store, { recursive: true, force: true });
    },
    diagnose: async () => {
      const parts = [`nats-server pid ${child?.pid ?? -1} on port ${port}; its last output:\n${output}`];
      for (const path of ['/jsz?streams=true&consumers=true', '/connz?subs=true', '/stacksz']) {
        try {
          const response = await fetch(`http://127.0.0.1:${monitorPort}${path}`, {
            signal: AbortSignal.timeout(5_000),
          });
          parts.push(`GET ${path}:\n${(await response.text()).slice(0, 60_000)}`);
        } catch (error) {
          parts.push(`GET ${path}: ${(error as Error).message}`);
        }
      }
      return parts.join('\n\n');
    },
  };
}
