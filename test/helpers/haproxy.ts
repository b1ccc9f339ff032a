/**
 * A real haproxy for a test (issue #32's live replica test): Debian's binary in the foreground,
 * HTTP mode, round robin over the given loopback servers, on a free loopback port. Tests that need
 * it call `haproxyPath()` first and skip, saying so, when it is absent (`.ci/run` installs it).
 *
 * The config is scripts/lib/haproxy-config.mjs's (the live replica experiment's), its health
 * check on GET /health.
 *
 * Hazard: the server is a child process; every test that starts one must stop() it (by pid).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { haproxyConfig } from '../../scripts/lib/haproxy-config.mjs';
import { childStopper } from './child-stop.js';
import { freePort, waitListening } from './loopback-port.js';

/** The haproxy binary (Debian's /usr/sbin one, or on PATH); undefined when absent. */
export function haproxyPath(): string | undefined {
  for (const path of ['/usr/sbin/haproxy', '/usr/bin/haproxy']) if (existsSync(path)) return path;
  const which = spawnSync('sh', ['-c', 'command -v haproxy'], { encoding: 'utf8' });
  const found = which.stdout.trim();
  return which.status === 0 && found !== '' ? found : undefined;
}

export const HAPROXY_SKIP_REASON = 'haproxy is not installed (Debian package haproxy; .ci/run installs it): skipped';

export interface Haproxy {
  /** http://127.0.0.1:PORT */
  readonly url: string;
  readonly pid: number;
  /** SIGTERM, then SIGKILL after 2 s; removes its config directory. */
  stop(): Promise<void>;
}

/** Starts haproxy in front of `servers`; throws when the binary is absent. */
export async function startHaproxy(servers: readonly string[]): Promise<Haproxy> {
  const binary = haproxyPath();
  if (binary === undefined) throw new Error(HAPROXY_SKIP_REASON);
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-haproxy-'));
  const port = await freePort();
  const config = join(dir, 'haproxy.cfg');
  writeFileSync(config, haproxyConfig(port, servers, '/health'));
  // -db: foreground, no daemon; -W would fork a master; -q keeps its alerts off stdout.
  const child = spawn(binary, ['-db', '-q', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let output = '';
  child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4_000)));
  const stopChild = childStopper(child, 2_000);
  const stop = async (): Promise<void> => {
    await stopChild();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitListening(port, child, 'haproxy', 10_000);
  } catch (error) {
    await stop();
    throw new Error(`${(error as Error).message}\n${output}`, { cause: error });
  }
  return { url: `http://127.0.0.1:${port}`, pid: child.pid!, stop };
}
