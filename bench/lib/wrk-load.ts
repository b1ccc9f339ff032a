/**
 * A closed loop with wrk (Debian's `wrk`), when installed: one client thread in C costs the
 * machine several times less CPU per request than autocannon, which matters when the client
 * shares 2 cores with the server under test (bench/proxy-threads.ts). Each of the 64 connections
 * cycles through the target's requests, as autocannon's do.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { Target } from './proxy-load.js';

export function findWrk(): string | undefined {
  for (const candidate of ['/usr/bin/wrk', '/usr/local/bin/wrk'])
    try {
      execFileSync(candidate, ['--version'], { stdio: 'ignore' });
      return candidate;
    } catch (error) {
      // wrk --version exits 1 after printing its version; ENOENT means it is not there.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' && (error as { status?: number }).status === 1)
        return candidate;
    }
  return undefined;
}

/** A Lua long string that cannot end early: its level has more `=` than any `]=…]` in the text. */
function luaString(text: string): string {
  let level = '';
  while (text.includes(`]${level}]`)) level += '=';
  return `[${level}[${text}]${level}]`;
}

function script(target: Target): string {
  const entries = target.requests.map(
    (r) =>
      `{ headers = { ${Object.entries({ 'content-type': 'application/json', ...r.headers })
        .map(([k, v]) => `[ ${luaString(k)} ] = ${luaString(v)}`)
        .join(', ')} }, body = ${luaString(r.body)} }`,
  );
  return `local requests = { ${entries.join(',\n')} }
local i = 0
request = function()
  i = i % #requests + 1
  return wrk.format("POST", ${luaString(target.path)}, requests[i].headers, requests[i].body)
end
`;
}

const UNITS: Record<string, number> = { us: 1, ms: 1e3, s: 1e6 };

export interface WrkResult {
  ok: number;
  errors: number;
  rps: number;
  p50_us: number;
  p99_us: number;
}

/** wrk -t1 -c`connections` for `seconds` (whole seconds, at least 1: wrk takes no fractions) against 127.0.0.1:port; bounded by its own duration plus a margin. */
export async function wrkLoop(wrk: string, target: Target, connections: number, seconds: number): Promise<WrkResult> {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-wrk-'));
  try {
    const file = join(dir, 'requests.lua');
    writeFileSync(file, script(target));
    const args = [
      '-t1',
      `-c${connections}`,
      `-d${Math.max(1, Math.round(seconds))}s`,
      '--latency',
      '-s',
      file,
      `http://127.0.0.1:${target.port}`,
    ];
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn(wrk, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout.on('data', (c: Buffer) => (text += c.toString()));
      child.stderr.on('data', (c: Buffer) => (text += c.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), (seconds + 30) * 1000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve(text);
        else reject(new Error(`wrk exited ${code}: ${text}`));
      });
    });
    const number = (re: RegExp) => Number(re.exec(output)?.[1] ?? NaN);
    const latency = (pct: string) => {
      const m = new RegExp(`^\\s+${pct}%\\s+([\\d.]+)(us|ms|s)$`, 'm').exec(output);
      return m === null ? NaN : Number(m[1]) * UNITS[m[2]!]!;
    };
    const total = number(/(\d+) requests in/);
    // A wrk that ran but printed no summary (another version, a Lua error) must not become NaN figures.
    if (!Number.isFinite(total)) throw new Error(`wrk printed no "N requests in" summary: ${output}`);
    const non2xx = number(/Non-2xx or 3xx responses: (\d+)/) || 0;
    const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
    const socketErrors = socket === null ? 0 : socket.slice(1).reduce((n, x) => n + Number(x), 0);
    return {
      ok: total - non2xx,
      errors: non2xx + socketErrors,
      rps: number(/Requests\/sec:\s+([\d.]+)/) * ((total - non2xx) / Math.max(1, total)),
      p50_us: latency('50'),
      p99_us: latency('99'),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
