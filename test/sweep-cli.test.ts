/** `kvroute sweep` through the built CLI: refusals (exit 2 usage, exit 1 bad trace), --out rules, --force. */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { cellId } from '../src/cli/sweep-layout.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-sweep-cli-'));
const trace = join(dir, 'small.jsonl');
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kvroute = (args: string[]) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000, maxBuffer: 1 << 26 });

beforeAll(() => {
  const synth = kvroute(['trace', 'synth', '--sessions', '12', '--duration', '30', '-o', trace]);
  expect(synth.status, synth.stderr).toBe(0);
});

describe('kvroute sweep refusals', () => {
  const usage: [string, string[], RegExp][] = [
    ['an empty policy list', ['--policies', ','], /--policies is empty/],
    [
      'an unknown policy',
      ['--policies', 'sticky,nope'],
      /--policies item must be one of round_robin, .*min_ttft, each with \+offload .*v3 .*got "nope"/,
    ],
    ['a repeated policy', ['--policies', 'sticky,sticky'], /sticky is listed twice/],
    ['an unknown engine state', ['--engine-state', 'es1'], /--engine-state: unknown es1; known: shadow, shm/],
    ['--live with --backends', ['--live', '--backends', 'http://127.0.0.1:1'], /exclude each other/],
    ['a bad backend URL', ['--backends', 'ftp://x'], /is not an http\(s\) URL/],
    ['--hot without --live', ['--hot'], /apply to --live only/],
  ];
  it.each(usage)('refuses %s (exit 2)', (_name, args, message) => {
    const out = join(dir, 'refused');
    const run = kvroute(['sweep', '--trace', trace, '--out', out, ...args]);
    expect(run.stderr).toMatch(message);
    expect(run.status).toBe(2);
    expect(existsSync(out)).toBe(false);
  });

  it('refuses stdin and missing flags (exit 2)', () => {
    expect(kvroute(['sweep', '--trace', '-', '--out', join(dir, 'x')]).stderr).toMatch(/not stdin/);
    expect(kvroute(['sweep', '--out', join(dir, 'x')]).status).toBe(2);
    expect(kvroute(['sweep', '--trace', trace]).stderr).toMatch(/needs --out DIR/);
  });

  it('exits 2 on a missing trace and 1 on one that fails to read, and writes no sweep.json', () => {
    const missing = kvroute(['sweep', '--trace', join(dir, 'missing.jsonl'), '--out', join(dir, 'm')]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/missing\.jsonl: no such file \(ENOENT\)/);
    expect(existsSync(join(dir, 'm'))).toBe(false);
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"timestamp": 1, "input_length": 3\n');
    const run = kvroute(['sweep', '--trace', bad, '--out', join(dir, 'b'), '--policies', 'sticky']);
    expect(run.status, `${run.signal ?? ''} ${run.stderr}`).toBe(1);
    expect(run.stderr).toMatch(/bad\.jsonl:line 1: malformed JSON/);
    expect(existsSync(join(dir, 'b', 'sweep.json'))).toBe(false);
  });

  it('refuses an --out that is not writable or not empty (exit 2); --force reuses it', () => {
    writeFileSync(join(dir, 'afile'), '');
    const notDir = kvroute(['sweep', '--trace', trace, '--out', join(dir, 'afile', 'x'), '--policies', 'sticky']);
    expect(notDir.status).toBe(2);
    expect(notDir.stderr).toMatch(/is not writable: ENOTDIR/);
    const out = join(dir, 'full');
    mkdirSync(out);
    writeFileSync(join(out, 'keep.txt'), 'x');
    const full = kvroute(['sweep', '--trace', trace, '--out', out, '--policies', 'sticky']);
    expect(full.status).toBe(2);
    expect(full.stderr).toMatch(/exists and is not empty \(--force removes its previous sweep and reuses it\)/);
    const forced = kvroute(['sweep', '--trace', trace, '--out', out, '--policies', 'sticky,unified+A+B', '--force']);
    expect(forced.status, forced.stderr).toBe(0);
    expect(forced.stdout).toContain('## B3: per cell');
    expect(forced.stdout).toContain('| unified+A+B | 1.');
    expect(readdirSync(join(out, 'cells')).sort()).toEqual([
      'sticky-shadow',
      'sticky-shm',
      'unified_A_B-shadow',
      'unified_A_B-shm',
    ]);
    const again = kvroute([
      'sweep',
      '--trace',
      trace,
      '--out',
      out,
      '--policies',
      'lmetric',
      '--engine-state',
      'shm',
      '--force',
      '--json',
    ]);
    expect(again.status, again.stderr).toBe(0);
    expect(readdirSync(join(out, 'cells'))).toEqual(['lmetric-shm']);
    const printed = JSON.parse(again.stdout) as { sweep: { cells: { id: string }[] }; es_ablation: unknown[] };
    expect(printed.sweep).toEqual(JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')));
    expect(printed.es_ablation).toEqual([]);
  }, 60_000);
});

describe('cell ids', () => {
  it('are filesystem-safe', () => {
    expect(cellId('unified+A+B', 'shadow')).toBe('unified_A_B-shadow');
    expect(cellId('load_only', 'shm')).toBe('load_only-shm');
    expect(cellId('a/b c', 'shm')).toBe('a_b_c-shm');
  });
});
