/**
 * `kvroute tune` through the built CLI on tiny traces (20 sessions, 3 instances): the best point
 * is the lowest of those evaluated, a point's figure is what `kvroute sim run` measures, a run is
 * a function of its flags, every bad --param is refused (exit 2), --holdout reports without
 * choosing, --out holds what --json prints, and the progress line.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { givenOptions } from '../src/cli/command-kit.js';
import { UsageError } from '../src/cli/common.js';
import { createCli } from '../src/cli/program.js';
import type { TuneResult } from '../src/cli/tune-result.js';
import { tuneOptions } from '../src/cli/tune-verb.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-tune-cli-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const trace = (seed: number): string => join(dir, `seed${seed}.jsonl`);

const kvroute = (args: string[]) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000, maxBuffer: 1 << 26 });

beforeAll(() => {
  for (const seed of [1, 2, 11]) {
    const synth = kvroute([
      'trace',
      'synth',
      '--sessions',
      '20',
      '--duration',
      '20',
      '--seed',
      `${seed}`,
      '-o',
      trace(seed),
    ]);
    expect(synth.status, synth.stderr).toBe(0);
  }
});

const BASE = [
  'tune',
  '--trace',
  `${trace(1)},${trace(2)}`,
  '--policy',
  'unified',
  '--instances',
  '3',
  '--workers',
  '2',
];
const PARAM = ['--param', 'affinityThreshold=0:1,overloadFactor=0.5:3'];

function tune(args: string[]): { result: TuneResult; stdout: string; stderr: string } {
  const run = kvroute([...BASE, ...args, '--json']);
  expect(run.status, run.stderr).toBe(0);
  return { result: JSON.parse(run.stdout) as TuneResult, stdout: run.stdout, stderr: run.stderr };
}

/** The result without what differs between two runs of the same flags. */
const stable = (r: TuneResult) => ({ ...r, wall_s: 0, started_at: '' });

/** `kvroute sim run`'s TTFT p90 of `policy` on `file`. */
function simTtftP90(file: string, policy: string): number {
  const run = kvroute(['sim', 'run', '--trace', file, '--policy', policy, '--instances', '3', '--json']);
  expect(run.status, run.stderr).toBe(0);
  return (JSON.parse(run.stdout) as { ttft_s: { p90: number } }).ttft_s.p90;
}

describe('kvroute tune', () => {
  let first: ReturnType<typeof tune>;
  const out = join(dir, 'result.json');
  beforeAll(() => {
    first = tune([...PARAM, '--samples', '3', '--seed', '7', '--out', out]);
  });

  it('reports as best the lowest objective of the evaluated points, with its margins', () => {
    const r = first.result;
    expect(r.format).toBe('kvroute-tune');
    expect(r.points).toHaveLength(3);
    expect(r.search.rounds).toEqual([{ round: 1, method: 'maximin-lhs', points: 3 }]);
    expect(r.search.simulations).toBe(8);
    for (const p of r.points) expect(p.objective).toBeCloseTo((p.per_trace[0]! + p.per_trace[1]!) / 2, 12);
    const lowest = Math.min(...r.points.map((p) => p.objective));
    expect(r.best.objective).toBe(lowest);
    expect(r.points.find((p) => p.id === r.best.id)).toMatchObject({ params: r.best.params, objective: lowest });
    expect(r.best.spec).toEqual({ name: 'unified', ...r.best.params });
    const others = r.points.filter((p) => p.id !== r.best.id).map((p) => p.objective);
    expect(r.margins.vs_runner_up).toMatchObject({ objective: Math.min(...others) });
    expect(r.margins.vs_runner_up!.delta).toBeGreaterThanOrEqual(0);
    expect(r.margins.vs_defaults.delta).toBeCloseTo(r.defaults.objective - lowest, 12);
    for (const [i, interval] of r.margins.intervals.entries()) {
      const value = r.best.params[r.params[i]!.name]!;
      expect(interval.lo).toBeLessThanOrEqual(value);
      expect(interval.hi).toBeGreaterThanOrEqual(value);
    }
    expect(r.holdout).toBeNull();
  });

  it("measures a setting as kvroute sim run does: the defaults' figure per trace", () => {
    expect(first.result.defaults.params).toEqual({ affinityThreshold: 0.5, overloadFactor: 2 });
    expect(first.result.defaults.per_trace).toEqual([simTtftP90(trace(1), 'unified'), simTtftP90(trace(2), 'unified')]);
  });

  it('writes what --json prints to --out', () => {
    expect(readFileSync(out, 'utf8')).toBe(first.stdout);
  });

  it('is a function of its flags: the same --seed gives the same result', () => {
    expect(stable(tune([...PARAM, '--samples', '3', '--seed', '7']).result)).toEqual({
      ...stable(first.result),
      command: expect.any(Array),
    });
  });

  it('refines around the best, evaluating the defaults once when they are a point of the grid', () => {
    const r = tune(['--param', 'affinityThreshold=0.5:1', '--samples', '6', '--aggregate', 'worst']).result;
    expect(r.search.rounds.map((round) => round.method)).toEqual(['maximin-lhs', 'maximin-lhs']);
    expect(r.points.filter((p) => p.round === 2).length).toBeGreaterThan(0);
    for (const p of r.points) expect(p.objective).toBe(Math.max(...p.per_trace));
    const grid = tune(['--param', 'overloadFactor=1:3', '--samples', '3']).result;
    expect(grid.points.map((p) => p.params.overloadFactor)).toEqual([1, 2, 3]);
    expect(grid.search.simulations).toBe(6); // the defaults (overloadFactor 2) are point 2
  });

  it('evaluates the best and the defaults on --holdout traces without letting them choose; prints tables', () => {
    const file = join(dir, 'holdout.json');
    const run = kvroute([...BASE, ...PARAM, '--samples', '3', '--seed', '7', '--holdout', trace(11), '--out', file]);
    expect(run.status, run.stderr).toBe(0);
    const withHoldout = JSON.parse(readFileSync(file, 'utf8')) as TuneResult;
    expect(withHoldout.best).toEqual(first.result.best);
    expect(withHoldout.points).toEqual(first.result.points);
    const h = withHoldout.holdout!;
    expect(h.traces.map((t) => t.path)).toEqual([trace(11)]);
    expect(h.defaults.per_trace).toEqual([simTtftP90(trace(11), 'unified')]);
    expect(h.best.per_trace).toHaveLength(1);
    expect(h.vs_defaults.delta).toBeCloseTo(h.defaults.objective - h.best.objective, 12);
    expect(withHoldout.search.simulations).toBe(10);
    const headings = [
      '# kvroute tune: unified, ttft_p90 (s), mean over 2 traces',
      '## Points, best first',
      '## Best',
      '## Margins',
      '## Holdout (never used to choose)',
    ];
    for (const heading of headings) expect(run.stdout).toContain(heading);
    expect(run.stdout).toContain('| defaults | - | 0.5 | 2 |');
    expect(run.stdout).toContain(
      `As a policy spec (new Router({ policy }), POST /admin/policy): ${JSON.stringify(h && withHoldout.best.spec)}`,
    );
    expect(run.stderr).toMatch(/^kvroute tune: 1\/\d+ /m);
    expect(run.stderr).toMatch(/kvroute tune: 10 simulations, .* wall; wrote .*holdout\.json\n$/);
  });
});

describe('kvroute tune refusals', () => {
  const refusals: [string, string[], string][] = [
    [
      'an unknown parameter',
      ['--param', 'nope=1:2'],
      '--param nope=1:2: unknown parameter "nope"; tunable: affinityThreshold, overloadFactor, decodeWeight, ringVnodes',
    ],
    [
      'a parameter the policy does not read',
      ['--param', 'ringVnodes=1:10'],
      '--param ringVnodes=1:10: policy unified does not read ringVnodes (read by session_hash); unified reads: affinityThreshold, overloadFactor, decodeWeight, ringFirstTurn',
    ],
    ['lo above hi', ['--param', 'overloadFactor=3:1'], '--param overloadFactor=3:1: lo 3 is greater than hi 1'],
    [
      'a bound outside the range',
      ['--param', 'affinityThreshold=0:2'],
      "--param affinityThreshold=0:2: hi 2 is outside affinityThreshold's range [0, 1]",
    ],
    [
      'a negative bound',
      ['--param', 'decodeWeight=-1:1'],
      "--param decodeWeight=-1:1: lo -1 is outside decodeWeight's range [0, 1]",
    ],
    [
      'a bound that is not a number',
      ['--param', 'overloadFactor=a:3'],
      '--param overloadFactor=a:3: lo "a" is not a number',
    ],
    ['an empty bound', ['--param', 'overloadFactor=1:'], '--param overloadFactor=1:: hi "" is not a number'],
    [
      'a fractional bound of an integer',
      ['--policy', 'session_hash', '--param', 'ringVnodes=1.5:10'],
      '--param ringVnodes=1.5:10: lo 1.5 is not an integer (ringVnodes is one)',
    ],
    [
      'no lo:hi',
      ['--param', 'overloadFactor=1-3'],
      '--param overloadFactor=1-3: expected name=lo:hi, e.g. overloadFactor=1:3',
    ],
    [
      'a repeated parameter',
      ['--param', 'overloadFactor=1:2,overloadFactor=2:3'],
      '--param overloadFactor=2:3: overloadFactor is given twice',
    ],
    [
      'an empty list',
      ['--param', ','],
      '--param is empty; unified reads: affinityThreshold, overloadFactor, decodeWeight, ringFirstTurn',
    ],
    [
      'a policy with no tunables',
      ['--policy', 'sticky', '--param', 'overloadFactor=1:2'],
      '--param overloadFactor=1:2: policy sticky does not read overloadFactor (read by unified, unified_kv_both); sticky reads: ringFirstTurn',
    ],
    ['no --param', [], 'tune needs --param NAME=LO:HI[,NAME=LO:HI…]; see kvroute tune --help'],
    [
      'a refining round that leaves one point',
      ['--param', 'overloadFactor=1:2', '--samples', '4', '--refine', '3'],
      '--refine 3 leaves fewer than 2 of --samples 4 for the first round',
    ],
    [
      'stdin',
      ['--trace', '-', '--param', 'overloadFactor=1:2'],
      '--trace: tune reads each trace once per point, so not stdin',
    ],
    [
      'a holdout trace that is also tuned on',
      ['--param', 'overloadFactor=1:2', '--holdout', trace(1)],
      `--holdout ${trace(1)} is also a --trace; a holdout trace must be unseen`,
    ],
    [
      'an unknown objective',
      ['--objective', 'ttft', '--param', 'overloadFactor=1:2'],
      '--objective must be one of ttft_p50',
    ],
    [
      'an --out in a missing directory',
      ['--param', 'overloadFactor=1:2', '--out', join(dir, 'no', 'r.json')],
      `--out ${join(dir, 'no', 'r.json')} is not writable: ENOENT`,
    ],
  ];
  it.each(refusals)('refuses %s with a UsageError naming it', (_name, args, message) => {
    const { program } = createCli('0.0.0');
    const command = program.commands.find((c) => c.name() === 'tune')!;
    command.parseOptions(['--trace', trace(1), '--policy', 'unified', ...args]);
    expect(() => tuneOptions(givenOptions(command))).toThrow(UsageError);
    expect(() => tuneOptions(givenOptions(command))).toThrow(message);
  });

  it('exits 2 on a bad --param, before any simulation, with the message after the verb', () => {
    const run = kvroute(['tune', '--trace', trace(1), '--policy', 'unified', '--param', 'overloadFactor=3:1']);
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe('kvroute tune: --param overloadFactor=3:1: lo 3 is greater than hi 1\n');
  });

  it('exits 2 on a trace that does not exist, naming it', () => {
    const run = kvroute([
      'tune',
      '--trace',
      join(dir, 'missing.jsonl'),
      '--policy',
      'unified',
      '--param',
      'overloadFactor=1:2',
    ]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/missing\.jsonl: no such file \(ENOENT\)/);
  });
});

describe('kvroute tune on a terminal', () => {
  it('draws a progress bar instead of a line per simulation, and clears it', () => {
    const quote = (arg: string): string => `'${arg.replace(/'/g, `'\\''`)}'`;
    const args = [...BASE, '--param', 'overloadFactor=1:3', '--samples', '3', '--json'];
    const command = `${[process.execPath, cli, ...args].map(quote).join(' ')} > ${quote(join(dir, 'tty.json'))}`;
    const run = spawnSync('script', ['-qec', command, '/dev/null'], { encoding: 'utf8', timeout: 60_000 });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/tune .*\d+% · \d+ \/ 6 simulations · /);
    expect(run.stdout).not.toMatch(/kvroute tune: 1\//);
    expect(run.stdout).toMatch(/kvroute tune: \d+ simulations, .* wall\r?\n$/);
    expect(existsSync(join(dir, 'tty.json'))).toBe(true);
    expect((JSON.parse(readFileSync(join(dir, 'tty.json'), 'utf8')) as TuneResult).points).toHaveLength(3);
  });
});
