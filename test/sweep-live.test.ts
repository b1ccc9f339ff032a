/**
 * The live sweep's plumbing: runLiveCell starts a fresh `kvroute sim serve` fleet (with the
 * state feed for an shm cell) and `kvroute serve` in front of it, calls `kvroute replay`, and
 * stops every child it started, also when replay fails or is missing from the build. runSweep's
 * live path is checked with a stand-in runner that writes records the way replay does.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { planCells, type SweepManifest } from '../src/cli/sweep-layout.js';
import { CLI_PATH, runLiveCell, startFleet, startProxy, type LiveCellRunner } from '../src/cli/sweep-live.js';
import { runSweep } from '../src/cli/sweep-run.js';
import { readRecordFile, writeRecords } from '../src/trace/record-file.js';
import type { RequestRecord } from '../src/trace/records.js';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-sweep-live-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const line = (session: string, turn: number, at: number): string =>
  JSON.stringify({
    session_id: session,
    turn,
    timestamp: at,
    input_length: 64,
    output_length: 4,
    block_size: 16,
    hash_ids: [1, 2, 3, 4],
  });
const trace = join(dir, 'tiny.jsonl');
writeFileSync(trace, `${[line('a', 1, 0), line('b', 1, 0.05), line('a', 2, 0.1)].join('\n')}\n`);

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('live cells', () => {
  it('starts a fleet and a proxy in front of it, on loopback, and stops both', async () => {
    const pids: number[] = [];
    const fleet = await startFleet(2, undefined, 50, (pid) => pids.push(pid));
    const proxy = await startProxy(fleet.urls, 'sticky', 'shadow', (pid) => pids.push(pid));
    try {
      expect(fleet.urls).toHaveLength(2);
      expect(fleet.urls.every((url) => url.startsWith('http://127.0.0.1:'))).toBe(true);
      expect(proxy.base).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect((await fetch(`${proxy.base}/v1/models`)).status).toBe(200);
    } finally {
      await proxy.stop();
      await fleet.stop();
    }
    expect(pids.map(alive)).toEqual([false, false]);
  }, 60_000);

  it.each(['shadow', 'shm'] as const)(
    'runs a %s cell end to end (fleet, proxy, replay at the fleet speed) and stops every child it started',
    async (engineState) => {
      const [cell] = planCells(['unified+A+B'], [engineState], 'live');
      const spawned: string[][] = [];
      const pids: number[] = [];
      const records = join(dir, `${cell!.id}.msgpack`);
      const run = runLiveCell(cell!, {
        mode: 'live',
        instances: 2,
        speed: 50,
        records,
        trace,
        startedAt: new Date(),
        onSpawn: (pid, args) => {
          pids.push(pid);
          spawned.push(args);
        },
      });
      await run;
      expect(spawned.map((args) => args.slice(0, 2).join(' '))).toEqual([
        'sim serve',
        'serve --backends',
        'replay --trace',
      ]);
      const fleetArgs = spawned[0]!;
      const proxyArgs = spawned[1]!;
      if (engineState === 'shm') {
        const feed = fleetArgs[fleetArgs.indexOf('--shm') + 1]!;
        expect(proxyArgs[proxyArgs.indexOf('--engine-state') + 1]).toBe(`shm:${feed}`);
      } else {
        expect(fleetArgs).not.toContain('--shm');
        expect(proxyArgs[proxyArgs.indexOf('--engine-state') + 1]).toBe('shadow');
      }
      expect(proxyArgs[proxyArgs.indexOf('--policy') + 1]).toBe('unified+A+B');
      expect(spawned[2]).toEqual(expect.arrayContaining(['--trace', trace, '--records', records, '--speed', '50']));
      const replayedFile = readRecordFile(records);
      expect(replayedFile.header).toMatchObject({ source: 'replay' });
      expect(replayedFile.records.length).toBeGreaterThan(0);
      expect(replayedFile.records.every((r) => r.error === undefined && r.instance >= 0)).toBe(true);
      if (engineState === 'shm')
        expect(existsSync(join('/dev/shm', fleetArgs[fleetArgs.indexOf('--shm') + 1]!))).toBe(false);
      expect(pids.map(alive)).toEqual(pids.map(() => false));
    },
    60_000,
  );
});

describe('backends cells', () => {
  it('puts the proxy in front of the given engines, with a state publisher for shm, and stops both', async () => {
    const fleet = await startFleet(2, undefined, 50);
    try {
      const [cell] = planCells(['lmetric'], ['shm'], 'backends');
      const spawned: string[][] = [];
      const pids: number[] = [];
      await runLiveCell(cell!, {
        mode: 'backends',
        instances: 2,
        backends: fleet.urls,
        records: join(dir, 'backends.msgpack'),
        trace,
        startedAt: new Date(),
        onSpawn: (pid, args) => {
          pids.push(pid);
          spawned.push(args);
        },
      }).catch((error: Error) => expect(error.message).toMatch(/replay/));
      expect(spawned.map((args) => args.slice(0, 2).join(' '))).toEqual([
        'state publish',
        'serve --backends',
        'replay --trace',
      ]);
      expect(spawned[0]).toEqual(expect.arrayContaining(['--engines', fleet.urls.join(',')]));
      const feed = spawned[0]![spawned[0]!.indexOf('--shm') + 1]!;
      expect(spawned[1]).toEqual(
        expect.arrayContaining(['--backends', fleet.urls.join(','), '--engine-state', `shm:${feed}`]),
      );
      expect(pids.map(alive)).toEqual(pids.map(() => false));
      expect(existsSync(join('/dev/shm', feed))).toBe(false);
    } finally {
      await fleet.stop();
    }
  }, 60_000);
});

describe('runSweep, live mode', () => {
  it('--hot shares one fleet, with the feed on, across cells, and stops it', async () => {
    const spawned: string[][] = [];
    const pids: number[] = [];
    const out = join(dir, 'hot');
    const run = runSweep({
      trace,
      reader: {},
      policies: ['sticky'],
      engineStates: ['shm', 'shadow'],
      out,
      force: false,
      mode: 'live',
      instances: 2,
      preset: 'h20-qwen3-coder-30b-a3b',
      live: {
        mode: 'live',
        instances: 2,
        hot: true,
        speed: 50,
        onSpawn: (pid, args) => {
          pids.push(pid);
          spawned.push(args);
        },
      },
      command: ['sweep', '--live', '--hot'],
    });
    // Without replay in the build the first cell fails; with it, both cells run.
    const finished = await run.then(
      () => true,
      (error: Error) => {
        expect(error.message).toMatch(/replay/);
        return false;
      },
    );
    const verbs = spawned.map((args) => args.slice(0, 2).join(' '));
    expect(verbs.filter((v) => v === 'sim serve')).toHaveLength(1);
    expect(verbs.slice(0, 3)).toEqual(['sim serve', 'serve --backends', 'replay --trace']);
    const feed = spawned[0]![spawned[0]!.indexOf('--shm') + 1]!;
    expect(spawned[1]).toEqual(expect.arrayContaining(['--engine-state', `shm:${feed}`]));
    expect(pids.map(alive)).toEqual(pids.map(() => false));
    expect(existsSync(join('/dev/shm', feed))).toBe(false);
    expect(existsSync(join(out, 'sweep.json'))).toBe(finished);
  }, 60_000);

  it('writes the layout from the records each live cell leaves', async () => {
    const runner: LiveCellRunner = async (cell, options) => {
      const records: RequestRecord[] = [0, 1].map((turn) => ({
        session: 'a',
        turn,
        instance: cell.engine_state === 'shm' ? turn : 0,
        dispatch: turn,
        first_token: turn + 0.5,
        finish: turn + 1,
        input_tokens: 64,
        cached_tokens: turn * 48,
        output_tokens: 4,
        overlapped: false,
        preemptions: 0,
        status: 200,
      }));
      writeRecords(options.records, records);
      return { fingerprint: 'sha256:0000000000000000:3' };
    };
    const out = join(dir, 'sweep');
    const outcome = await runSweep({
      trace,
      reader: {},
      policies: ['sticky'],
      engineStates: ['shadow', 'shm'],
      out,
      force: false,
      mode: 'live',
      instances: 2,
      preset: 'h20-qwen3-coder-30b-a3b',
      live: { mode: 'live', instances: 2 },
      liveRunner: runner,
      command: ['sweep', '--live'],
    });
    const manifest = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as SweepManifest;
    expect(manifest.cells.map((c) => [c.id, c.mode])).toEqual([
      ['sticky-shadow', 'live'],
      ['sticky-shm', 'live'],
    ]);
    expect(manifest.trace.fingerprint).toBe('sha256:0000000000000000:3');
    const summary = JSON.parse(readFileSync(join(out, 'cells/sticky-shm/summary.json'), 'utf8')) as {
      makespan_s: number;
      instances_per_session: number;
    };
    expect(summary.makespan_s).toBe(2);
    expect(summary.instances_per_session).toBe(2);
    expect(outcome.pairs[0]!.comparison.reroute_pct).toBe(50);
  }, 30_000);
});

describe('a live sweep stopped by a signal', () => {
  it('stops its children, removes its feed and exits 143 without sweep.json', async () => {
    const out = join(dir, 'signalled');
    const child = spawn(
      process.execPath,
      [CLI_PATH, 'sweep', '--live', '--trace', trace, '--out', out, '--policies', 'sticky', '--engine-state', 'shm'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const feed = `kvroute-sweep-${child.pid}-sticky-shm`;
    // The fleet creates the cell's feed once it runs: signal the sweep then.
    const watcher = watch('/dev/shm');
    await new Promise<void>((resolve) => {
      const check = (): void => {
        if (existsSync(join('/dev/shm', feed))) resolve();
      };
      watcher.on('change', check);
      check();
    });
    watcher.close();
    const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(child.pid)], { encoding: 'utf8' })
      .split('\n')
      .map((line) => Number(line.trim()))
      .filter((pid) => pid > 0);
    expect(children.length).toBeGreaterThan(0);
    child.kill('SIGTERM');
    expect(await exited).toBe(143);
    expect(stderr).toContain('SIGTERM: stopping');
    expect(children.map(alive)).toEqual(children.map(() => false));
    expect(existsSync(join('/dev/shm', feed))).toBe(false);
    expect(existsSync(join(out, 'sweep.json'))).toBe(false);
  }, 60_000);
});
