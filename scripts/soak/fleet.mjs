// @ts-check
/**
 * The soak's processes: each simulated engine is its own `kvroute sim serve --instances 1`, on
 * ports picked once, so it can be killed, restarted on the same ports (same backend URL, same KV
 * event and replay endpoints), SIGSTOPped and continued; and `kvroute serve --threads N` in front.
 */
import { createServer } from 'node:net';

import { startCli, stopChild } from './children.mjs';

export const ADMIN_TOKEN = 'soak-admin-token-0123456789';

/** Ports freePort() handed out in this process: a port released by its probe may come back. */
const handedOut = new Set();

/**
 * A free loopback TCP port (bound, read, released), never one this process was given before:
 * the kernel may hand a released port out again, and two engines on one port would leave the
 * second failing to listen however often it retried.
 */
export async function freePort() {
  for (;;) {
    const server = createServer();
    await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
    const address = server.address();
    await new Promise((resolve) => server.close(() => resolve(undefined)));
    if (address === null || typeof address === 'string') throw new Error('no port');
    if (handedOut.has(address.port)) continue;
    handedOut.add(address.port);
    return address.port;
  }
}

/** One simulated engine process on fixed ports. */
export class Engine {
  /**
   * @param {number} index
   * @param {{ speed: number, tokenizer: string | undefined }} options
   */
  constructor(index, options) {
    this.index = index;
    this.options = options;
    this.httpPort = 0;
    this.kvPort = 0;
    this.replayPort = 0;
    /** @type {import('node:child_process').ChildProcess | null} */
    this.child = null;
    this.starts = 0;
  }

  get url() {
    return `http://127.0.0.1:${this.httpPort}`;
  }
  get kvUrl() {
    return `tcp://127.0.0.1:${this.kvPort}`;
  }
  get replayUrl() {
    return `tcp://127.0.0.1:${this.replayPort}`;
  }
  get pid() {
    return this.child?.pid ?? 0;
  }

  async start() {
    if (this.httpPort === 0)
      [this.httpPort, this.kvPort, this.replayPort] = [await freePort(), await freePort(), await freePort()];
    const args = this.args();
    // A restarted engine may find its port in TIME_WAIT or its ZeroMQ port not yet released: retry.
    for (let attempt = 0; ; attempt++) {
      try {
        const { child } = await startCli(args, /http:\/\/127\.0\.0\.1:\d+/);
        this.child = child;
        this.starts++;
        return;
      } catch (error) {
        if (attempt >= 5) throw error;
        // Never started: another process may hold a port picked for it; pick again (a restart keeps
        // its ports, its backend URL is the proxy's).
        if (this.starts === 0) {
          [this.httpPort, this.kvPort, this.replayPort] = [await freePort(), await freePort(), await freePort()];
          args.splice(0, args.length, ...this.args());
        }
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    }
  }

  /** The engine's command line on its ports. */
  args() {
    const args = ['sim', 'serve', '--instances', '1', '--port', String(this.httpPort)];
    args.push('--kv-events', String(this.kvPort), '--kv-events-replay', String(this.replayPort));
    args.push('--speed', String(this.options.speed));
    if (this.options.tokenizer !== undefined) args.push('--tokenizer', this.options.tokenizer);
    return args;
  }

  /** SIGKILL by pid, and wait for the exit. */
  async kill() {
    const child = this.child;
    if (child === null || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    this.child = null;
  }

  /** @param {'SIGSTOP' | 'SIGCONT'} signal */
  signal(signal) {
    this.child?.kill(signal);
  }

  async stop() {
    if (this.child !== null) await stopChild(this.child);
    this.child = null;
  }
}

/**
 * Starts `kvroute serve --threads N` in front of `engines`, their KV events read through `kvUrls`
 * (the soak's relays) and replayed straight from each engine.
 * @param {{ engines: Engine[], kvUrls: string[], threads: number, speed: number, tokenizer: string | undefined, maxBody: string }} options
 */
export async function startProxy(options) {
  const args = ['serve', '--port', '0', '--threads', String(options.threads)];
  args.push('--backends', options.engines.map((e) => e.url).join(','));
  args.push('--kv-events', options.kvUrls.join(','));
  args.push('--kv-replay', options.engines.map((e) => e.replayUrl).join(','));
  // Fast health checks, so a stopped or killed engine leaves routing within about a second.
  args.push('--health-interval', '500', '--health-timeout', '500', '--health-failures', '2');
  args.push('--max-body', options.maxBody, '--reconcile-interval', '2000');
  args.push('--cost-prior-scale', String(1 / options.speed));
  if (options.tokenizer !== undefined) args.push('--tokenizer', options.tokenizer);
  const { child, match, stderr } = await startCli(args, /^kvroute serve: listening on (http:\/\/\S+)\n/m, {
    env: { KVROUTE_ADMIN_TOKEN: ADMIN_TOKEN },
    timeoutMs: 60_000,
  });
  return { child, base: /** @type {string} */ (match[1]), stderr };
}
