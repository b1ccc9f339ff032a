/**
 * What a newcomer meets in their first runs of `kvroute` (issue 29, "the first hour"): a trace as
 * an operand or as --trace, input errors that say what was expected (exit 2), an unknown verb
 * with --help reported as unknown, no silent wait on a terminal's stdin, counts in the singular.
 * Runs the built CLI (dist/cli.js).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { kvroute, synthTraceDir } from './helpers/cli-trace.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));

describe('the first hour', () => {
  const { dir, traceFile } = synthTraceDir('first-hour', ['--sessions', '3', '--seed', '2']);

  it('sim run takes the trace as its operand or as --trace, and refuses two different ones', () => {
    const operand = kvroute(['sim', 'run', traceFile, '--instances', '1', '--policy', 'sticky']);
    expect(operand.status, operand.stderr).toBe(0);
    const flag = kvroute(['sim', 'run', '--trace', traceFile, '--instances', '1', '--policy', 'sticky']);
    expect(flag.stdout).toBe(operand.stdout);
    const both = kvroute(['sim', 'run', traceFile, '--trace', `${dir}/other.jsonl`]);
    expect(both.status).toBe(2);
    expect(both.stderr).toContain('got two traces');
  });

  it.each([
    ['sim', 'run'],
    ['sweep', '--out', 'never'],
    ['tune', '--policy', 'unified', '--param', 'overloadFactor=1:2'],
    ['replay', '--target', 'http://127.0.0.1:9'],
    ['analyze', 'trace'],
  ])('%s %s: a missing or directory trace is a usage error naming the verb and what it expected', (...verb) => {
    const missing = kvroute([...verb, `${dir}/nope.jsonl`]);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/expected a trace file .* at .*nope\.jsonl: no such file \(ENOENT\)/);
    expect(missing.stderr).toContain(`${verb[0]}`);
    const directory = kvroute([...verb, dir]);
    expect(directory.status).toBe(2);
    expect(directory.stderr).toMatch(/expected a trace file .*: is a directory/);
  });

  it.each([
    ['analyze', 'run'],
    ['analyze', 'compare', 'also-missing.records'],
  ])('%s %s: a missing record file is a usage error naming what was expected', (...verb) => {
    const out = kvroute([...verb.slice(0, 2), `${dir}/nope.records`, ...verb.slice(2)]);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/expected a record file .* at .*nope\.records: no such file \(ENOENT\)/);
  });

  it('hash names what it expected of a missing file (exit 2)', () => {
    const out = kvroute(['hash', `${dir}/nope.txt`]);
    expect(out.status).toBe(2);
    expect(out.stderr).toMatch(/^kvroute hash: hash expected a prompt .* no such file \(ENOENT\)/);
  });

  it.each([
    [['fleet', 'join', '--help'], "kvroute: unknown command 'fleet'"],
    [['state', 'bogus', '-h'], "kvroute state: unknown command 'bogus'"],
    [['trace', 'sinth', '--help'], "kvroute trace: unknown command 'sinth' (Did you mean synth?)"],
  ])('%j: an unknown verb with --help is reported, exit 2', (args, message) => {
    const out = kvroute(args);
    expect(out.status).toBe(2);
    expect(out.stderr).toContain(message);
    expect(out.stdout).toBe('');
  });

  it.each([['hash'], ['explain']])('%s on a terminal stdin with no FILE says how to use it (exit 2)', (verb) => {
    // `script` gives the child a pseudo-terminal; -e passes on its exit status.
    const out = spawnSync('script', ['-qec', `${process.execPath} ${cli} ${verb}`, '/dev/null'], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(out.status).toBe(2);
    expect(out.stdout).toMatch(new RegExp(`kvroute ${verb}: .*stdin is a terminal; e\\.g\\. `));
  });

  it('counts one instance in the singular', () => {
    const out = kvroute(['sim', 'run', traceFile, '--instances', '1', '--policy', 'sticky']);
    expect(out.stdout).toContain(' 1 instance ');
    expect(out.stdout).not.toContain('1 instances');
  });
});
