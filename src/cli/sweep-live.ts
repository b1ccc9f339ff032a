/**
 * Live sweep cells: one (policy, engine state) cell through a real `kvroute serve`, driven by
 * `kvroute replay`, every piece a child process of this one (loopback only):
 *
 *   kvroute sim serve --port 0 --instances N [--shm FEED]        (live; cold per cell unless --hot)
 *   kvroute state publish --engines URLS --shm FEED              (backends × shm: the state feed)
 *   kvroute serve --backends URLS --policy P --engine-state shadow|shm:FEED --port 0
 *   kvroute replay --trace T --target PROXY --records cells/<id>/records.msgpack
 *
 * Children are started in that order, their addresses read from their "listening" lines, and
 * stopped in reverse (SIGTERM, SIGKILL after a grace period), also when a step fails.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { EngineScaling } from '../sim/engine-preset.js';
import { readRecordFile } from '../trace/record-file.js';
import type { FleetGroup } from '../sim/fleet-spec.js';
import { engineScalingArgs } from './engine-options.js';
import { fleetArgs } from './fleet-options.js';
import type { SweepCell } from './sweep-layout.js';

export interface LiveOptions {
  mode: 'live' | 'backends';
  /** live: engines in each fresh fleet. */
  instances: number;
  /** live: `sim serve --speed`. */
  speed?: number;
  /** live: `sim serve --preset`. */
  preset?: string;
  /** live: `sim serve --prefill-cost/--decode-cost/--kv-capacity`. */
  scaling?: EngineScaling;
  /** live: `sim serve --fleet`, a mixed fleet of `instances` engines. */
  groups?: FleetGroup[];
  /** live: one fleet for every cell (started with the feed on) instead of a cold one per cell. */
  hot?: boolean;
  /** backends: the engines' base URLs. */
  backends?: string[];
  /** Extra flags for `kvroute replay`. */
  replayArgs?: string[];
  /** Set by the sweep under --hot: the running fleet. */
  fleet?: Fleet;
  /** Told the pid of every child started (tests check they are gone). */
  onSpawn?: (pid: number, args: string[]) => void;
}

export interface LiveCellOptions extends LiveOptions {
  /** Where replay writes the cell's records. */
  records: string;
  trace: string;
  startedAt: Date;
}

/** A live cell that could not run (a child failed to start, replay failed or is missing). Exit 2. */
export class LiveCellError extends Error {
  readonly code = 'ERR_KVROUTE_SWEEP_LIVE' as const;
}

/** What a live cell hands back: the trace fingerprint from its records' header. */
export interface LiveCellResult {
  fingerprint: string;
}

export type LiveCellRunner = (cell: SweepCell, options: LiveCellOptions) => Promise<LiveCellResult>;

export interface Fleet {
  urls: string[];
  /** The feed the fleet publishes (sim serve --shm). */
  feed?: string;
  stop(): Promise<void>;
}

/** dist/cli.js, also when this module runs from its TypeScript source (tests). */
export const CLI_PATH = fileURLToPath(
  import.meta.url.endsWith('.ts')
    ? new URL('../../dist/cli.js', import.meta.url)
    : new URL('../cli.js', import.meta.url),
);

/** Every child running now: what stopAllChildren stops when the sweep itself is stopped. */
const running = new Set<() => Promise<void>>();
/** Feeds a cell created and has not removed yet. */
const ownFeeds = new Set<string>();

/** Stops every child this process started and has not stopped yet (SIGINT/SIGTERM of a live sweep). */
export async function stopAllChildren(): Promise<void> {
  await Promise.all([...running].map((stop) => stop()));
  for (const feed of ownFeeds) removeFeed(feed);
}

const START_TIMEOUT_MS = 20_000;
const STOP_GRACE_MS = 10_000;

export interface Child {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  stop(): Promise<void>;
}

/** Starts `kvroute …args` and resolves once `ready(stdout, stderr)` returns a value (≤ 20 s). */
export async function startChild<T>(
  args: string[],
  ready: (stdout: string, stderr: string) => T | undefined,
  onSpawn?: LiveOptions['onSpawn'],
): Promise<{ value: T } & Child> {
  const child = spawn(process.execPath, [CLI_PATH, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid !== undefined) onSpawn?.(child.pid, args);
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
    await exited;
    clearTimeout(timer);
  };
  running.add(stop);
  void exited.then(() => running.delete(stop));
  try {
    const value = await new Promise<T>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new LiveCellError(`kvroute ${args[0]} printed no address in ${START_TIMEOUT_MS / 1000} s`)),
        START_TIMEOUT_MS,
      );
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new LiveCellError(`kvroute ${args.slice(0, 2).join(' ')} exited early (${code}): ${stderr.trim()}`));
      });
      const check = (): void => {
        const found = ready(stdout, stderr);
        if (found !== undefined) {
          clearTimeout(timer);
          resolve(found);
        }
      };
      child.stdout!.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
        check();
      });
      child.stderr!.on('data', check);
    });
    return { value, child, stdout: () => stdout, stderr: () => stderr, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** Runs `kvroute …args` to its end; resolves with its exit code and stderr. */
export function runChild(
  args: string[],
  onSpawn?: LiveOptions['onSpawn'],
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [CLI_PATH, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  if (child.pid !== undefined) onSpawn?.(child.pid, args);
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  running.add(stop);
  child.once('exit', () => running.delete(stop));
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stderr }));
  });
}

/**
 * A fresh `kvroute sim serve` fleet on free loopback ports, publishing `feed` when given, its
 * engines of `engine.preset` scaled by `engine.scaling`.
 */
export async function startFleet(
  instances: number,
  feed?: string,
  speed?: number,
  onSpawn?: LiveOptions['onSpawn'],
  engine: Pick<LiveOptions, 'preset' | 'scaling' | 'groups'> = {},
): Promise<Fleet> {
  const args = ['sim', 'serve', ...fleetArgs(instances, engine.groups), '--port', '0', '--host', '127.0.0.1'];
  if (feed !== undefined) args.push('--shm', feed);
  if (speed !== undefined) args.push('--speed', String(speed));
  if (engine.preset !== undefined) args.push('--preset', engine.preset);
  args.push(...engineScalingArgs(engine.scaling ?? {}));
  const started = await startChild(
    args,
    (stdout) => {
      const urls = stdout.match(/http:\/\/127\.0\.0\.1:\d+/g) ?? [];
      return urls.length >= instances ? urls.slice(0, instances) : undefined;
    },
    onSpawn,
  );
  return { urls: started.value, ...(feed === undefined ? {} : { feed }), stop: started.stop };
}

/** `kvroute serve` in front of `backends`; resolves with its base URL. */
export async function startProxy(
  backends: string[],
  policy: string,
  engineState: string,
  onSpawn?: LiveOptions['onSpawn'],
): Promise<Child & { base: string }> {
  const args = ['serve', '--backends', backends.join(','), '--policy', policy, '--engine-state', engineState];
  args.push('--port', '0', '--host', '127.0.0.1');
  const started = await startChild(
    args,
    (stdout) => /^kvroute serve: listening on (http:\/\/\S+)$/m.exec(stdout)?.[1],
    onSpawn,
  );
  return { ...started, base: started.value };
}

/** A feed name unique to this sweep and cell (/dev/shm/NAME). */
export function feedName(cellId: string): string {
  return `kvroute-sweep-${process.pid}-${cellId.replace(/[^A-Za-z0-9_.-]/g, '_')}`;
}

/**
 * Runs one live or backends cell: starts what it needs, replays the trace through the proxy
 * into `options.records`, stops everything it started.
 */
export async function runLiveCell(cell: SweepCell, options: LiveCellOptions): Promise<LiveCellResult> {
  const stops: (() => Promise<void>)[] = [];
  let ownFeed: string | undefined;
  try {
    const feed = cell.engine_state === 'shm' ? (options.fleet?.feed ?? feedName(cell.id)) : undefined;
    if (feed !== undefined && options.fleet === undefined) ownFeeds.add((ownFeed = feed));
    let urls: string[];
    if (options.mode === 'backends') {
      urls = options.backends ?? [];
      if (feed !== undefined) {
        const publisher = await startChild(
          ['state', 'publish', '--engines', urls.join(','), '--shm', feed],
          (_stdout, stderr) => (stderr.includes('kvroute state publish: ') ? true : undefined),
          options.onSpawn,
        );
        stops.unshift(publisher.stop);
      }
    } else if (options.fleet !== undefined) {
      urls = options.fleet.urls;
    } else {
      const fleet = await startFleet(options.instances, feed, options.speed, options.onSpawn, options);
      stops.unshift(fleet.stop);
      urls = fleet.urls;
    }
    const proxy = await startProxy(urls, cell.policy, feed === undefined ? 'shadow' : `shm:${feed}`, options.onSpawn);
    stops.unshift(proxy.stop);
    return await replayCell(proxy.base, options);
  } finally {
    for (const stop of stops) await stop();
    if (ownFeed !== undefined) {
      removeFeed(ownFeed);
      ownFeeds.delete(ownFeed);
    }
  }
}

/** Marks /dev/shm/NAME as this sweep's, so stopAllChildren removes it too. */
export function registerFeed(name: string): string {
  ownFeeds.add(name);
  return name;
}

/** Removes /dev/shm/NAME (the writers leave their feed behind on exit, for late readers). */
export function removeFeed(name: string): void {
  rmSync(join('/dev/shm', name), { force: true });
  ownFeeds.delete(name);
}

/**
 * `kvroute replay` against the proxy: the cell's records. Against a simulated fleet at `speed`
 * the replay runs the trace's clock as fast (`replay --speed`), so the engines see the trace's
 * arrival rate; against real backends it runs in real time.
 */
async function replayCell(target: string, options: LiveCellOptions): Promise<LiveCellResult> {
  const args = ['replay', '--trace', options.trace, '--target', target, '--records', options.records];
  if (options.mode === 'live' && options.speed !== undefined) args.push('--speed', String(options.speed));
  const { code, stderr } = await runChild([...args, ...(options.replayArgs ?? [])], options.onSpawn);
  if (code !== 0) throw new LiveCellError(`kvroute replay exited ${code}: ${stderr.trim()}`);
  const header = readRecordFile(options.records).header;
  return { fingerprint: header?.trace.fingerprint ?? '' };
}
