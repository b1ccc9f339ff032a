/** `kvroute trace …` and `kvroute analyze trace` end to end, through the built CLI. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const MOONCAKE = fileURLToPath(new URL('../data/mooncake_synthetic_trace.jsonl', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-trace-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const kvroute = (args: string[], input?: string) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', input, timeout: 60_000, maxBuffer: 1 << 28 });

const SUMMARY_KEYS = ['requests', 'sessions', 'input_tokens', 'apc_ceiling', 'reuse', 'kv_footprint_bytes'];

function expectSummaryShape(summary: Record<string, unknown>): void {
  for (const key of SUMMARY_KEYS) expect(summary).toHaveProperty(key);
  for (const ceiling of ['any_session', 'intra_session', 'shared_prefix'])
    expect(Object.keys((summary.apc_ceiling as Record<string, object>)[ceiling]!).sort()).toEqual([
      'block_ratio',
      'hit_requests',
      'token_ratio',
    ]);
  expect(Object.keys(summary.reuse as object).sort()).toEqual([
    'cross_session',
    'intra_session',
    'shared_prefix',
    'unclassified',
  ]);
  expect(Object.keys(summary.kv_footprint_bytes as object).sort()).toEqual(['max', 'p50', 'p90', 'p95', 'p99']);
}

describe('kvroute analyze trace', () => {
  it('characterizes the public Mooncake trace as JSON', () => {
    const run = kvroute(['analyze', 'trace', MOONCAKE, '--json']);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const summary = JSON.parse(run.stdout);
    expectSummaryShape(summary);
    expect(summary).toMatchObject({ requests: 3993, sessions: 3993, input_tokens: 61194628, block_size: 512 });
    // Sessionless: nothing is intra-session, reuse past the shared prefixes is unclassified.
    expect(summary.apc_ceiling.intra_session.hit_requests).toBe(0);
    expect(summary.reuse.unclassified).toBeGreaterThan(0);
  });

  it('prints the same figures as text, and infers sessions on request', () => {
    const text = kvroute(['analyze', 'trace', MOONCAKE, '--workers', '0']);
    expect(text.status).toBe(0);
    expect(text.stdout).toMatch(/^3,993 requests · 3,993 sessions · input 61\.2 M tokens/);
    expect(text.stdout).toMatch(/any-session \(perfect global cache\)\s+\d+\.\d%/);
    const inferred = JSON.parse(kvroute(['analyze', 'trace', MOONCAKE, '--infer-sessions', '--json']).stdout);
    expect(inferred.sessions).toBeLessThan(3993);
    expect(inferred.apc_ceiling.intra_session.hit_requests).toBeGreaterThan(0);
  });

  it('exits 1 naming the line and field of a bad trace, and 2 for bad usage', () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(
      bad,
      '{"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]}\n{"timestamp": 1}\n',
    );
    const run = kvroute(['analyze', 'trace', bad]);
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(`kvroute analyze: ${bad}:line 2: input_length: missing field\n`);
    expect(kvroute(['analyze', 'trace', join(dir, 'none.jsonl')]).status).toBe(2);
    expect(kvroute(['analyze', 'trace', MOONCAKE, '--model', 'gpt-9']).stderr).toMatch(/--model must be one of/);
    expect(kvroute(['analyze', 'trace', MOONCAKE, '--workers', 'x']).status).toBe(2);
    expect(kvroute(['analyze', 'session']).stderr).toMatch(/^kvroute analyze: unknown command 'session'/);
  });
});

describe('kvroute trace', () => {
  const synth = join(dir, 'synth.jsonl');

  it('synth writes a session trace that validates and characterizes', () => {
    const run = kvroute(['trace', 'synth', '--sessions', '30', '--seed', '3', '-o', synth]);
    expect(run.status).toBe(0);
    expect(run.stderr).toMatch(/wrote \d+(\.\d k)? requests to /);
    const validate = JSON.parse(kvroute(['trace', 'validate', synth, '--json', '--strict']).stdout);
    expect(validate).toMatchObject({ format: 'session', blockSize: 16, sessions: 30 });
    const summary = JSON.parse(kvroute(['analyze', 'trace', synth, '--json']).stdout);
    expectSummaryShape(summary);
    expect(summary.sessions).toBe(30);
    expect(summary.apc_ceiling.intra_session.token_ratio).toBeGreaterThan(0.5);
  });

  it('transform caps turns, re-blocks and converts, from a file or stdin', () => {
    const capped = join(dir, 'capped.jsonl');
    const run = kvroute(['trace', 'transform', synth, '--cap-turns', '2', '--reblock', '64', '-o', capped]);
    expect(run.status).toBe(0);
    const lines = readFileSync(capped, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const perSession = new Map<string, number>();
    for (const line of lines) perSession.set(line.session_id, (perSession.get(line.session_id) ?? 0) + 1);
    expect(Math.max(...perSession.values())).toBeLessThanOrEqual(2);
    expect(lines.every((l) => l.block_size === 64 && l.hash_ids.length === Math.ceil(l.input_length / 64))).toBe(true);
    const mooncake = kvroute(
      ['trace', 'transform', '-', '--to', 'mooncake', '--window', '1'],
      readFileSync(MOONCAKE, 'utf8'),
    );
    expect(mooncake.status).toBe(0);
    const first = mooncake.stdout.split('\n')[0]!;
    expect(JSON.parse(first)).toEqual(JSON.parse(readFileSync(MOONCAKE, 'utf8').split('\n')[0]!));
  });

  it('refuses bad flags naming them', () => {
    expect(kvroute(['trace', 'synth', '--sessions', '0']).stderr).toMatch(
      /--sessions must be a positive integer, got 0/,
    );
    expect(kvroute(['trace', 'transform', synth, '--sample-sessions', '2']).stderr).toMatch(/--sample-sessions/);
    expect(kvroute(['trace', 'transform', synth, '--reblock', '24']).stderr).toMatch(
      /multiple of the trace's block size 16/,
    );
    expect(kvroute(['trace', 'frobnicate']).stderr).toMatch(/^kvroute trace: unknown command 'frobnicate'/);
  });
});
