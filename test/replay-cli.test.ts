/**
 * `kvroute replay` as a child process (dist/cli.js): SIGTERM mid-run stops sending, aborts what
 * is still in flight after --grace and leaves a readable record file; a target that is down at
 * start is a clear error, exit 2, no file; usage errors name the flag.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

import { afterEach, describe, expect, it } from 'vitest';

import { readRecordFile } from '../src/trace/record-file.js';
import { childStopper } from './helpers/child-stop.js';
import { refusingUrl, scopedRigs } from './helpers/proxy-harness.js';
import { CLI } from './helpers/proxy-serve-child.js';
import { scratch, sessionTrace, writeTraceFile } from './helpers/replay-rig.js';

const files = scratch();
const rigs = scopedRigs();
afterEach(() => rigs.closeAll());

describe('kvroute replay (CLI)', () => {
  it('SIGTERM mid-run: in-flight requests are recorded as aborted after --grace, the file stays readable; it says it was interrupted, exit 143', async () => {
    let started = 0;
    let wake: () => void = () => {};
    const threeStarted = new Promise<void>((resolve) => (wake = resolve));
    // Streams a token every 50 ms for 10 s: nothing finishes before the stop.
    const stub = await rigs.stub((_req, res) => {
      if (++started === 3) wake();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const timer = setInterval(() => res.write('data: {"choices":[{"text":" x"}]}\n\n'), 50);
      res.once('close', () => clearInterval(timer));
      setTimeout(() => res.end('data: [DONE]\n\n'), 10_000).unref();
    });
    const trace = writeTraceFile(files.path('sigterm.jsonl'), sessionTrace(3, 2, 1, 200));
    const out = files.path('sigterm.rec');
    const child = spawn(
      process.execPath,
      [CLI, 'replay', '--trace', trace, '--target', stub.url, '--records', out, '--grace', '0.3'],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const stop = childStopper(child, 10_000);
    const timeout = setTimeout(() => wake(), 15_000);
    await threeStarted;
    clearTimeout(timeout);
    expect(started).toBe(3);
    const code = await stop();
    expect(code, stderr).toBe(143);
    expect(stderr).toContain('stopping');
    expect(stderr).toMatch(
      /kvroute replay: interrupted: stopped sending after 3 requests; 3 records in .* hold only what completed/,
    );
    const file = readRecordFile(out);
    expect(file.truncated).toBeUndefined();
    expect(file.header).toMatchObject({ source: 'replay', mode: 'session' });
    // Three first turns in flight, aborted; the second turns were never sent, so never recorded.
    expect(file.records).toHaveLength(3);
    for (const r of file.records) {
      expect(r.turn).toBe(1);
      expect(r.error).toMatch(/^aborted/);
      expect(r.output_tokens).toBeGreaterThan(0);
    }
    expect(stdout).toMatch(/^INTERRUPTED: replayed 3 requests .* 3 failed \(3 aborted\)/);
  });

  it('a target that is down at start: a clear error, exit 2, no record file', async () => {
    const trace = writeTraceFile(files.path('down.jsonl'), sessionTrace(1, 1));
    const out = files.path('down.rec');
    const target = await refusingUrl();
    const run = spawnSync(process.execPath, [CLI, 'replay', '--trace', trace, '--target', target, '--records', out], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(
      new RegExp(`^kvroute replay: the target ${target} is not reachable .*ECONNREFUSED.*is it running\\?`),
    );
    expect(existsSync(out)).toBe(false);
  });

  it.each([
    [['--target', 'http://127.0.0.1:9'], 'kvroute replay: replay needs a trace: replay IN, or --trace IN'],
    [['--trace', 'x.jsonl'], 'kvroute replay: replay needs --target URL (e.g. http://127.0.0.1:8000)'],
    [
      ['--trace', 'x', '--target', 'http://h', '--mode', 'poisson'],
      'kvroute replay: --mode poisson needs --rate R (requests per second)',
    ],
    [
      ['--trace', 'x', '--target', 'http://h', '--slo', 'e2e=1', '--find-srr'],
      'kvroute replay: --slo: "e2e=1" is not a term',
    ],
  ])('%j: exit 2, %s', (args, message) => {
    const run = spawnSync(process.execPath, [CLI, 'replay', ...args], { encoding: 'utf8', timeout: 30_000 });
    expect(run.status).toBe(2);
    expect(run.stderr.startsWith(message), run.stderr).toBe(true);
  });
});
