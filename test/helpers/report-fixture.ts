/**
 * A sweep directory for the report tests, made by running kvroute itself (dist/cli.js): a
 * synthetic trace of 40 sessions, its characterization, `sim run` with records for each policy,
 * sticky once more under `--engine-state shm`, the interference cells, and the sweep.json the
 * sweep verb will write (docs/report.md).
 * Built once per test file, into a temporary directory the caller removes.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url));

/** Runs `kvroute ...args` in `cwd`; its stdout into `stdoutTo` when given. Throws on failure. */
export function kvroute(cwd: string, args: string[], stdoutTo?: string): string {
  const run = spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: 'utf8', timeout: 60_000 });
  if (run.status !== 0) throw new Error(`kvroute ${args.join(' ')}: exit ${run.status}: ${run.stderr}`);
  if (stdoutTo !== undefined) writeFileSync(join(cwd, stdoutTo), run.stdout);
  return run.stdout;
}

export const FIXTURE_POLICIES = ['lmetric', 'sticky', 'load_only'] as const;

/** A cell per policy under shadow counters, and sticky under shm too (the engine-state figure). */
export const FIXTURE_CELLS = [
  ...FIXTURE_POLICIES.map((policy) => ({ id: policy as string, policy: policy as string, engine_state: 'shadow' })),
  { id: 'sticky-shm', policy: 'sticky', engine_state: 'shm' },
];

export interface SweepFixture {
  dir: string;
  /** One cell's record file, for the single-run input. */
  records: string;
}

export function buildSweepFixture(): SweepFixture {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-report-'));
  kvroute(dir, ['trace', 'synth', '--sessions', '40', '-o', 't.jsonl']);
  kvroute(dir, ['analyze', 'trace', 't.jsonl', '--json', '--workers', '0'], 'trace-summary.json');
  for (const cell of FIXTURE_CELLS) {
    mkdirSync(join(dir, 'cells', cell.id), { recursive: true });
    const records = `cells/${cell.id}/records.msgpack`;
    kvroute(
      dir,
      ['sim', 'run', '--trace', 't.jsonl', '--policy', cell.policy, '--engine-state', cell.engine_state].concat([
        '--records',
        records,
        '--json',
      ]),
      `cells/${cell.id}/summary.json`,
    );
  }
  kvroute(dir, ['sim', 'interference', '--json'], 'interference.json');
  const sweep = {
    trace: { path: 't.jsonl', fingerprint: 'fixture' },
    command: ['sweep', '--trace', 't.jsonl', '--policies', FIXTURE_POLICIES.join(',')],
    kvroute_version: '0.1.0',
    started_at: '2026-12-01T00:00:00.000Z',
    cells: FIXTURE_CELLS.map((cell) => ({
      ...cell,
      mode: 'sim',
      records: `cells/${cell.id}/records.msgpack`,
      summary: `cells/${cell.id}/summary.json`,
    })),
    trace_summary: 'trace-summary.json',
    interference: 'interference.json',
  };
  writeFileSync(join(dir, 'sweep.json'), JSON.stringify(sweep, null, 2));
  return { dir, records: join(dir, 'cells', FIXTURE_POLICIES[1], 'records.msgpack') };
}
