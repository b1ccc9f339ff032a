/**
 * A sweep stopped by Ctrl-C (SIGINT) says so, exits 130 and leaves a directory the next run
 * recognises as interrupted: refused with how to start over, which --force then does. A stopped
 * `state publish` removes its feed file. (An interrupted replay is covered in replay-cli.test.ts.)
 * Runs the built CLI (dist/cli.js).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { childStopper } from './helpers/child-stop.js';
import { kvroute, synthTraceDir } from './helpers/cli-trace.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));

describe('an interrupted sweep', () => {
  const { dir, traceFile } = synthTraceDir('interrupted', ['--sessions', '300', '--seed', '1']);

  it('says it was interrupted (exit 130), and the next run refuses it with how to start over', async () => {
    const out = join(dir, 'sweep');
    const args = [traceFile, '--out', out, '--workers', '1', '--policies', 'sticky,unified'];
    const child = spawn(process.execPath, [cli, 'sweep', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    const stop = childStopper(child, 10_000);
    let stderr = '';
    const firstCell = new Promise<void>((resolve) =>
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
        if (stderr.includes('1/4')) resolve();
      }),
    );
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      await firstCell;
      child.kill('SIGINT');
      expect(await exited, stderr).toBe(130);
    } finally {
      await stop();
    }
    expect(stderr).toMatch(/kvroute sweep: interrupted by SIGINT after [1-3] of 4 cells; .* run again with --force/);
    expect(existsSync(join(out, 'sweep.json'))).toBe(false);

    const again = kvroute(['sweep', ...args]);
    expect(again.status).toBe(2);
    expect(again.stderr).toContain('holds an interrupted sweep (cells/ but no sweep.json): add --force');
    const forced = kvroute(['sweep', ...args, '--force']);
    expect(forced.status, forced.stderr).toBe(0);
    expect(existsSync(join(out, 'sweep.json'))).toBe(true);
  }, 60_000);
});

describe('a stopped state publish', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    'removes its feed file on %s',
    async (signal) => {
      const feed = join(existsSync('/dev/shm') ? '/dev/shm' : tmpdir(), `kvroute-test-stop-${process.pid}-${signal}`);
      const child = spawn(
        process.execPath,
        [cli, 'state', 'publish', '--engines', 'http://127.0.0.1:9', '--shm', feed, '--interval', '20'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const stop = childStopper(child, 10_000);
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      try {
        const deadline = Date.now() + 15_000;
        while (!existsSync(feed) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
        expect(existsSync(feed)).toBe(true);
        child.kill(signal);
        expect(await exited).toBe(0);
      } finally {
        await stop();
      }
      expect(existsSync(feed)).toBe(false);
    },
    30_000,
  );
});
