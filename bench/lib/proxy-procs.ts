/**
 * The processes of the proxy benchmark (issue #6): the stub backend, nginx, the floor relay
 * (bench/proxy-floor.mjs) and `kvroute serve`, each a child of the bench, started on loopback,
 * stopped by its own pid and waited for.
 *
 * nginx: Debian's binary, with a config written into a temporary prefix (pid, logs and temp paths
 * all inside it, so it runs as any user):
 * - `worker_processes 1`: one event loop, as kvroute serves from one;
 * - upstream = the stub's ports with `keepalive` (idle connections kept per worker),
 *   `proxy_http_version 1.1` and an empty `Connection` header, so upstream connections are reused
 *   as kvroute's undici pools reuse theirs;
 * - `proxy_buffering off`, so SSE chunks are relayed as they come, as kvroute relays them;
 * - request bodies buffered in memory (1 MiB, no temp files; kvroute reads the body whole too);
 * - `access_log off` (kvroute keeps no access log), `keepalive_requests` high on both sides so no
 *   side recycles connections mid-run, listen backlog 4096.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const benchDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const repoDir = join(benchDir, '..');
export const KVROUTE_CLI = join(repoDir, 'dist', 'cli.js');

export interface Running {
  name: string;
  child: ChildProcess;
  /** The pid whose CPU time is the server's work (nginx: its first worker). */
  workerPid: number;
  /** Every pid whose CPU time is the server's work (nginx: all its workers). */
  workerPids: number[];
  port: number;
  /** Every port it listens on (the stub may listen on several). */
  ports: number[];
  /** SIGTERM, then waits; resolves with what went wrong, if anything. */
  stop(): Promise<string | undefined>;
}

/**
 * Spawns `command`, resolves with the first stdout match of `ready` (the child keeps running),
 * rejects if it exits or says nothing matching within `timeoutMs`.
 */
function spawnUntil(
  name: string,
  command: string,
  args: string[],
  ready: RegExp,
  timeoutMs: number,
): Promise<{ child: ChildProcess; match: RegExpMatchArray }> {
  const child = spawn(command, args, { cwd: repoDir, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => {
    stderr = (stderr + d).slice(-4000);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${name} did not get ready within ${timeoutMs} ms; stderr: ${stderr.trim()}`));
    }, timeoutMs);
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      const match = ready.exec(line);
      if (!match) return;
      clearTimeout(timer);
      lines.removeAllListeners('line');
      child.stdout!.resume(); // keep draining whatever it prints later
      resolve({ child, match });
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready; stderr: ${stderr.trim()}`));
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
  });
}

/**
 * SIGTERM to the child's pid, SIGKILL after `graceMs`. Resolves with what went wrong (undefined
 * when nothing did): with `expectZero`, any exit but 0.
 */
function stopChild(name: string, child: ChildProcess, graceMs = 5000, expectZero = false): Promise<string | undefined> {
  if (child.exitCode !== null || child.signalCode !== null)
    return Promise.resolve(
      expectZero ? `${name} had already exited (${child.exitCode ?? child.signalCode}) before SIGTERM` : undefined,
    );
  return new Promise((resolve) => {
    let killed = false;
    const kill = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, graceMs);
    child.once('exit', (code, signal) => {
      clearTimeout(kill);
      if (killed) resolve(`${name} did not exit within ${graceMs} ms of SIGTERM and was killed`);
      else resolve(expectZero && code !== 0 ? `${name} exited ${code ?? signal} on SIGTERM, not 0` : undefined);
    });
    child.kill('SIGTERM');
  });
}

/** The stub backend (bench/proxy-stub.ts) in its own process, through tsx. */
export async function startStub(options: { ports: number; chunks: number; chunkDelayMs: number; impl?: string }) {
  const args = [
    '--import',
    'tsx', // resolved from the repository: the child runs there
    join(benchDir, 'proxy-stub.ts'),
    '--impl',
    options.impl ?? 'uws',
    '--ports',
    String(options.ports),
    '--chunks',
    String(options.chunks),
    '--chunk-delay-ms',
    String(options.chunkDelayMs),
  ];
  const { child, match } = await spawnUntil('proxy-stub', process.execPath, args, /listening on (\S+)$/, 20_000);
  const ports = match[1]!.split(',').map((a) => Number(a.split(':')[1]));
  return running('stub', child, child.pid!, ports, () => stopChild('stub', child));
}

/** The tracing bench's OTLP/HTTP collector (bench/otlp-sink.ts) in its own process, through tsx. */
export async function startOtlpSink() {
  const args = ['--import', 'tsx', join(benchDir, 'otlp-sink.ts')];
  const { child, match } = await spawnUntil('otlp sink', process.execPath, args, /listening on (\d+)$/, 20_000);
  return running('otlp sink', child, child.pid!, [Number(match[1])], () => stopChild('otlp sink', child, 5000, true));
}

function running(
  name: string,
  child: ChildProcess,
  workerPid: number,
  ports: number[],
  stop: () => Promise<string | undefined>,
  workerPids: number[] = [workerPid],
) {
  return { name, child, workerPid, workerPids, port: ports[0]!, ports, stop } satisfies Running;
}

/** Whether dist/cli.js has the `serve` verb yet (its --help lists it). */
export function kvrouteServeAvailable(): boolean {
  if (!existsSync(KVROUTE_CLI)) return false;
  const help = spawnSync(process.execPath, [KVROUTE_CLI, '--help'], { encoding: 'utf8', timeout: 20_000 });
  return /^\s+serve\b/m.test(`${help.stdout}\n${help.stderr}`);
}

/** How a kvroute leg runs: its upstream client, its HTTP server, extra flags. */
export interface KvrouteLeg {
  upstream?: 'undici' | 'h1';
  http?: 'uws' | 'node';
  args?: string[];
}

/** The leg's name in reports: `kvroute`, or `kvroute-` + what differs from the default. */
export function kvrouteLegName(leg: KvrouteLeg, defaults: Required<Omit<KvrouteLeg, 'args'>>): string {
  const parts = [];
  if (leg.upstream !== undefined && leg.upstream !== defaults.upstream) parts.push(leg.upstream);
  if (leg.http !== undefined && leg.http !== defaults.http) parts.push(leg.http);
  return ['kvroute', ...parts].join('-');
}

/** `kvroute serve` on an ephemeral port, routing over `backends`; ready on its one stdout line. */
export async function startKvroute(backendPorts: number[], leg: KvrouteLeg = {}, name = 'kvroute') {
  const backends = backendPorts.map((p) => `http://127.0.0.1:${p}`).join(',');
  const args = [KVROUTE_CLI, 'serve', '--backends', backends, '--port', '0', '--policy', 'unified'];
  if (leg.upstream !== undefined) args.push('--upstream', leg.upstream);
  if (leg.http !== undefined) args.push('--http', leg.http);
  args.push(...(leg.args ?? []));
  const { child, match } = await spawnUntil(
    'kvroute serve',
    process.execPath,
    args,
    /^kvroute serve: listening on http:\/\/.+:(\d+)\/?$/,
    30_000,
  );
  return running(name, child, child.pid!, [Number(match[1])], () => stopChild(`${name} serve`, child, 5000, true));
}

/** Resident memory of a process in bytes (Linux /proc; NaN elsewhere). */
export function rssBytes(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1];
    return kb === undefined ? NaN : Number(kb) * 1024;
  } catch {
    return NaN;
  }
}

/**
 * The floor relay (bench/proxy-floor.mjs: bare uWebSockets.js + node:net, no work of its own) on
 * an ephemeral port, relaying to `backendPorts`, with the optional `steps` (lib/floor-steps.mjs);
 * ready on its one stdout line, exits 0 on SIGTERM.
 */
export async function startFloor(backendPorts: number[], steps: readonly string[] = []) {
  const args = [join(benchDir, 'proxy-floor.mjs'), '--backends', backendPorts.join(',')];
  if (steps.length > 0) args.push('--steps', steps.join(','));
  const { child, match } = await spawnUntil(
    'proxy-floor',
    process.execPath,
    args,
    /^proxy-floor: listening on 127\.0\.0\.1:(\d+)$/,
    20_000,
  );
  const name = steps.length > 0 ? `floor+${steps.join('+')}` : 'floor';
  return running(name, child, child.pid!, [Number(match[1])], () => stopChild('proxy-floor', child, 5000, true));
}

/** Debian's nginx binary, or undefined. */
export function findNginx(): string | undefined {
  for (const path of ['/usr/sbin/nginx', '/usr/bin/nginx']) if (existsSync(path)) return path;
  const which = spawnSync('sh', ['-c', 'command -v nginx'], { encoding: 'utf8' });
  return which.status === 0 && which.stdout.trim() !== '' ? which.stdout.trim() : undefined;
}

/** A port free on 127.0.0.1 right now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** Resolves once 127.0.0.1:port accepts a connection, polling until `timeoutMs`. */
async function waitForPort(port: number, timeoutMs: number, alive: () => boolean): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until && alive()) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = net.connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
}

/** nginx.conf for one worker proxying 127.0.0.1:port to the stub's ports. */
export function nginxConfig(
  prefix: string,
  port: number,
  backendPorts: number[],
  asRoot: boolean,
  workers = 1,
): string {
  return `# written by bench/lib/proxy-procs.ts for one benchmark run
${asRoot ? 'user root;\n' : ''}worker_processes ${workers};
worker_rlimit_nofile 16384;
pid ${prefix}/nginx.pid;
error_log ${prefix}/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
  client_body_temp_path ${prefix}/client_body;
  proxy_temp_path ${prefix}/proxy;
  fastcgi_temp_path ${prefix}/fastcgi;
  uwsgi_temp_path ${prefix}/uwsgi;
  scgi_temp_path ${prefix}/scgi;
  client_max_body_size 64m;
  client_body_buffer_size 1m;
  keepalive_requests 1000000;
  keepalive_timeout 120s;
  upstream stub {
${backendPorts.map((p) => `    server 127.0.0.1:${p};`).join('\n')}
    keepalive 1024;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
  }
  server {
    listen 127.0.0.1:${port} backlog=4096;
    location / {
      proxy_pass http://stub;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`;
}

/** nginx (`workers` workers, default one) in the foreground as a child, its prefix in a fresh temporary directory. */
export async function startNginx(binary: string, backendPorts: number[], workers = 1) {
  const prefix = mkdtempSync(join(tmpdir(), 'kvroute-bench-nginx-'));
  const port = await freePort();
  const conf = join(prefix, 'nginx.conf');
  writeFileSync(conf, nginxConfig(prefix, port, backendPorts, process.getuid?.() === 0, workers));
  const child = spawn(binary, ['-p', prefix, '-c', conf, '-e', join(prefix, 'error.log'), '-g', 'daemon off;'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const stop = async () => {
    const problem = await stopChild('nginx', child);
    rmSync(prefix, { recursive: true, force: true });
    return problem;
  };
  try {
    await waitForPort(port, 10_000, () => child.exitCode === null);
    if (child.exitCode !== null) throw new Error(`nginx exited (${child.exitCode})`);
  } catch (e) {
    const log = existsSync(join(prefix, 'error.log')) ? readFileSync(join(prefix, 'error.log'), 'utf8') : '';
    await stop();
    throw new Error(`${(e as Error).message}; ${stderr.trim()} ${log.trim()}`, { cause: e });
  }
  let found = nginxWorkers(child.pid!);
  for (let i = 0; found.length < workers && i < 40; i++) {
    await new Promise((r) => setTimeout(r, 50));
    found = nginxWorkers(child.pid!);
  }
  return running('nginx', child, found[0] ?? child.pid!, [port], stop, found.length > 0 ? found : [child.pid!]);
}

/** The worker processes of an nginx master: the processes whose parent it is (Linux /proc). */
function nginxWorkers(master: number): number[] {
  const workers: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Field 4 of stat(5), the parent pid, is the second after the command's closing ')'.
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === master) workers.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return workers;
}

/**
 * Pins a process and every thread it has to `cpus` (a taskset list: "1", "0-2"); its later
 * threads inherit it. False when it could not (no taskset: not Linux, util-linux missing).
 */
export function pinToCpus(pid: number, cpus: string): boolean {
  return spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' }).status === 0;
}

/** User + system CPU seconds of a process so far (Linux /proc; NaN elsewhere). */
export function cpuSeconds(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of stat(5), utime and stime, in clock ticks (USER_HZ, 100 on Linux).
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return NaN;
  }
}

/** CPU seconds the whole machine has run processes so far, all cores (Linux /proc/stat; NaN elsewhere). */
export function machineBusySeconds(): number {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal, in USER_HZ ticks: user, nice, system and
    // steal. Interrupt time is left out: loopback traffic is mostly the bench's own (about 6% of
    // the busy time in a direct run), and it is charged to no process, so it would pass for others'.
    return (cpu[0]! + cpu[1]! + cpu[2]! + cpu[7]!) / 100;
  } catch {
    return NaN;
  }
}
