/**
 * A policy as one command-line word (src/core/policy-arg.ts): NAME or NAME:KEY=VALUE…, the form
 * `kvroute tune` prints for its best setting and serve, sim run and sweep take.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { formatPolicyArg, parsePolicyArg } from '../src/core/policy-arg.js';

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-policy-arg-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const kvroute = (...args: string[]) => spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8' });

describe('parsePolicyArg', () => {
  it('reads a name, or a name and its tunables, and formats back to the same word', () => {
    expect(parsePolicyArg('sticky', '--policy')).toBe('sticky');
    const spec = parsePolicyArg('min_ttft:batchWeight=0.29:kvWeight=9.6:kvThreshold=5e-1', '--policy');
    expect(spec).toEqual({ name: 'min_ttft', batchWeight: 0.29, kvWeight: 9.6, kvThreshold: 0.5 });
    expect(parsePolicyArg(formatPolicyArg(spec), '--policy')).toEqual(spec);
    expect(parsePolicyArg('min_ttft:ringFirstTurn=1', 'x')).toEqual({ name: 'min_ttft', ringFirstTurn: 1 });
    expect(parsePolicyArg('unified+A+B:affinityThreshold=0.7', 'x')).toEqual({
      name: 'unified+A+B',
      affinityThreshold: 0.7,
    });
  });

  it.each([
    ['fastest', /--policy must be one of .*min_ttft/],
    ['min_ttft:', /--policy must be KEY=VALUE after "min_ttft:", got ""/],
    ['min_ttft:batchWeight', /--policy must be KEY=VALUE/],
    ['min_ttft:overloadFactor=2', /--policy must be a tunable min_ttft reads .*got "overloadFactor"/],
    ['sticky:batchWeight=1', /--policy must be a tunable sticky reads \(ringFirstTurn/],
    ['load_only:batchWeight=1', /--policy must be a tunable load_only reads \(none/],
    ['min_ttft:nope=1', /--policy must be a tunable min_ttft reads/],
    [
      'min_ttft:batchweight=1',
      /--policy must be a tunable min_ttft reads \(did you mean batchWeight\?\), got "batchweight"/,
    ],
    ['min_ttft:kvWeight=1:kvWeight=2', /--policy must be each tunable once/],
    ['min_ttft:kvWeight=0x10', /--policy kvWeight must be a finite number, got "0x10"/],
    ['min_ttft:kvWeight=Infinity', /--policy kvWeight must be a finite number/],
    ['min_ttft:tieTolerance=1.5', /--policy\.tieTolerance must be a number in \[0, 1\], got 1\.5/],
    ['session_hash:ringVnodes=2.5', /--policy\.ringVnodes must be an integer/],
    ['min_ttft:ringFirstTurn=2', /--policy\.ringFirstTurn must be an integer in \[0, 1\], got 2/],
    ['min_ttft:ringFirstTurn=0.5', /--policy\.ringFirstTurn must be an integer/],
    ['session_hash:ringFirstTurn=1', /--policy must be a tunable session_hash reads \(ringVnodes/],
  ])('refuses %s, naming the field and the reason', (text, message) => {
    expect(() => parsePolicyArg(text, '--policy')).toThrow(message);
  });
});

describe('the CLI takes a tuned setting', () => {
  const trace = join(dir, 't.jsonl');
  it('sim run --policy NAME:KEY=VALUE runs those tunables and records them', () => {
    expect(kvroute('trace', 'synth', '--sessions', '30', '--seed', '3', '-o', trace).status).toBe(0);
    const tuned = kvroute(
      'sim',
      'run',
      '--trace',
      trace,
      '--instances',
      '3',
      '--json',
      '--policy',
      'min_ttft:batchWeight=5:kvWeight=0',
    );
    const plain = kvroute('sim', 'run', '--trace', trace, '--instances', '3', '--json', '--policy', 'min_ttft');
    expect(tuned.status).toBe(0);
    expect(JSON.parse(tuned.stdout)).not.toEqual(JSON.parse(plain.stdout));
    const records = join(dir, 'r.msgpack');
    const again = kvroute(
      'sim',
      'run',
      '--trace',
      trace,
      '--instances',
      '3',
      '--records',
      records,
      '--policy',
      'min_ttft:batchWeight=5:kvWeight=0',
    );
    expect(again.status).toBe(0);
    expect(readFileSync(records).includes(Buffer.from('min_ttft:batchWeight=5:kvWeight=0'))).toBe(true);
  });

  it('sweep --policies takes the same words, checked before any cell runs', () => {
    const out = join(dir, 'sweep');
    const bad = kvroute('sweep', '--trace', trace, '--out', out, '--policies', 'lmetric,min_ttft:kvWeight=-2');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--policies item\.kvWeight must be a number in \[0, 1000\], got -2/);
    const good = kvroute(
      'sweep',
      '--trace',
      trace,
      '--out',
      out,
      '--instances',
      '3',
      '--engine-state',
      'shadow',
      '--policies',
      'min_ttft,min_ttft:batchWeight=5',
    );
    expect(good.status).toBe(0);
    const manifest = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8'));
    expect(manifest.cells.map((c: { policy: string }) => c.policy)).toEqual(['min_ttft', 'min_ttft:batchWeight=5']);
  });
});
