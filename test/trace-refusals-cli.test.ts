/**
 * The trace rules of issue 14 through the built CLI: every verb that reads a trace gives the
 * right answer on slightly-off input (an unstated block size, gzip, a stated time unit) or
 * refuses it with exit 1 (bad data) or 2 (a flag that does not apply), never a wrong number.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

import { afterAll, describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const MOONCAKE = fileURLToPath(new URL('../data/mooncake_synthetic_trace.jsonl', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-refusals-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kvroute = (args: string[], input?: string | Buffer) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input, timeout: 60_000, maxBuffer: 1 << 28 });

const lines: Record<string, unknown>[] = readFileSync(MOONCAKE, 'utf8')
  .trim()
  .split('\n')
  .slice(0, 800)
  .map((line) => JSON.parse(line));

function write(name: string, content: string | Buffer | readonly object[]): string {
  const path = join(dir, name);
  writeFileSync(
    path,
    typeof content === 'string' || Buffer.isBuffer(content)
      ? content
      : content.map((l) => JSON.stringify(l)).join('\n') + '\n',
  );
  return path;
}

/** The verbs that read a trace, each as the arguments that read FILE. */
const READERS: Array<[string, (file: string) => string[]]> = [
  ['trace validate', (file) => ['trace', 'validate', file]],
  ['analyze trace', (file) => ['analyze', 'trace', file, '--workers', '0']],
  ['sim run', (file) => ['sim', 'run', '--trace', file, '--instances', '2']],
  ['trace transform', (file) => ['trace', 'transform', file, '-o', join(dir, 'out.jsonl')]],
];

describe.each(READERS)('kvroute %s', (_, args) => {
  it('refuses an empty input with exit 1, saying it holds no requests', () => {
    for (const content of ['', '\n \n']) {
      const out = kvroute(args(write('empty.jsonl', content)));
      expect(out.status).toBe(1);
      expect(out.stderr).toMatch(/empty\.jsonl holds no requests/);
      expect(out.stdout).toBe('');
    }
  });

  it('refuses --infer-sessions on a session trace with exit 2', () => {
    const session = write('session.jsonl', [{ session_id: 'a', block_size: 512, ...lines[0] }]);
    const out = kvroute([...args(session), '--infer-sessions']);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/session\.jsonl is a session trace \(line 1 has session_id\).*Mooncake traces only/);
  });

  it('refuses lines that disagree on an unstated block size with exit 1, suggesting --block-size', () => {
    const mixed = write('mixed.jsonl', [lines[0]!, { ...lines[1], hash_ids: [1] }]);
    const out = kvroute(args(mixed));
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/line 2: hash_ids: the lines disagree on the block size.*--block-size/);
  });

  it('refuses a zstd file, naming the command that decompresses it', () => {
    const out = kvroute(args(write('trace.jsonl.zst', Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 1, 2]))));
    expect(out.status).toBe(1);
    expect(out.stderr).toMatch(/zstd-compressed, which kvroute does not read.*zstd -dc/);
  });
});

describe('answers that used to be wrong', () => {
  const sessionLines = lines.map((line, i) => ({ session_id: `s${i % 40}`, ...line }));
  const unstated = write('unstated.jsonl', sessionLines);
  const stated = write(
    'stated.jsonl',
    sessionLines.map((line) => ({ ...line, block_size: 512 })),
  );

  it('analyze and sim run read an unstated 512-token session trace at 512, saying so', () => {
    for (const args of [
      ['analyze', 'trace', '--json', '--workers', '0'],
      ['sim', 'run', '--json', '--instances', '2', '--trace'],
    ]) {
      const got = kvroute([...args, unstated]);
      const want = kvroute([...args, stated]);
      expect(got.status).toBe(0);
      expect(JSON.parse(got.stdout)).toEqual(JSON.parse(want.stdout));
      expect(got.stderr).toMatch(/note: block size 512 inferred: .*--block-size 512/);
      expect(want.stderr).not.toMatch(/note:/);
    }
  });

  it('transform writes the inferred block size', () => {
    const out = join(dir, 'reblocked.jsonl');
    expect(kvroute(['trace', 'transform', unstated, '-o', out]).status).toBe(0);
    expect(JSON.parse(readFileSync(out, 'utf8').split('\n')[0]!)).toMatchObject({ block_size: 512 });
  });

  it('sim run warns on a Mooncake trace in seconds, and --time-unit s gives the true run', () => {
    const seconds = write(
      'seconds.jsonl',
      lines.map((line) => ({ ...line, timestamp: (line.timestamp as number) / 1000 })),
    );
    const truth = kvroute(['sim', 'run', '--json', '--instances', '2', '--trace', write('ms.jsonl', lines)]);
    const misread = kvroute(['sim', 'run', '--json', '--instances', '2', '--trace', seconds]);
    expect(misread.stderr).toMatch(/warning: .*timestamps look like seconds, not milliseconds.*--time-unit s/);
    const stated = kvroute(['sim', 'run', '--json', '--instances', '2', '--time-unit', 's', '--trace', seconds]);
    expect(stated.stderr).not.toMatch(/warning/);
    const metrics = (out: { stdout: string }) => JSON.parse(out.stdout) as { ttft_s: { p50: number } };
    expect(metrics(stated).ttft_s.p50).toBeCloseTo(metrics(truth).ttft_s.p50, 6);
    expect(metrics(misread).ttft_s.p50).not.toBeCloseTo(metrics(truth).ttft_s.p50, 1);
  });

  it('reads gzip from a file and from stdin', () => {
    const zipped = gzipSync(readFileSync(stated));
    const want = JSON.parse(kvroute(['analyze', 'trace', '--json', '--workers', '0', stated]).stdout);
    const fromFile = kvroute(['analyze', 'trace', '--json', '--workers', '0', write('t.jsonl.gz', zipped)]);
    const fromStdin = kvroute(['analyze', 'trace', '--json', '--workers', '0', '-'], zipped);
    expect(JSON.parse(fromFile.stdout)).toEqual(want);
    expect(JSON.parse(fromStdin.stdout)).toEqual(want);
  });

  it('validate counts what it read, and names a bad --time-unit', () => {
    const out = kvroute(['trace', 'validate', '--json', stated]);
    expect(JSON.parse(out.stdout)).toMatchObject({ format: 'session', requests: 800, blockSize: 512 });
    const bad = kvroute(['trace', 'validate', stated, '--time-unit', 'h']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--time-unit must be one of s, ms, got h/);
  });
});
