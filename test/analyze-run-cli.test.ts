/** `kvroute analyze run` and `analyze compare`, run as a user would, on `sim run --records` output. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const kvroute = (args: string[]) => spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });
const dir = mkdtempSync(join(tmpdir(), 'kvroute-analyze-run-'));
const at = (name: string): string => join(dir, name);

let simJson: Record<string, unknown>;

beforeAll(() => {
  expect(kvroute(['trace', 'synth', '--sessions', '30', '--seed', '4', '-o', at('trace.jsonl')]).status).toBe(0);
  expect(kvroute(['trace', 'synth', '--sessions', '30', '--seed', '5', '-o', at('other.jsonl')]).status).toBe(0);
  const sim = (trace: string, policy: string, out: string) =>
    kvroute([
      'sim',
      'run',
      '--trace',
      at(trace),
      '--policy',
      policy,
      '--instances',
      '4',
      '--records',
      at(out),
      '--json',
    ]);
  const sticky = sim('trace.jsonl', 'sticky', 'sticky.rec');
  expect(sticky.status).toBe(0);
  // learned_costs is the simulator's learner beside its engines' truth, not a fact of the
  // records, so analyze run has no counterpart (sim run --json alone carries it).
  const { learned_costs: learned, ...fromRecords } = JSON.parse(sticky.stdout) as Record<string, unknown>;
  expect(learned).toBeTypeOf('object');
  simJson = fromRecords;
  expect(sim('trace.jsonl', 'lmetric', 'lmetric.rec').status).toBe(0);
  expect(sim('other.jsonl', 'lmetric', 'other.rec').status).toBe(0);
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('kvroute analyze run', () => {
  it("--json has sim run's keys with its numbers, plus slow", () => {
    const out = kvroute(['analyze', 'run', at('sticky.rec'), '--json']);
    expect(out.status).toBe(0);
    expect(out.stderr).toBe('');
    const analysis = JSON.parse(out.stdout);
    for (const key of Object.keys(simJson)) expect(analysis).toHaveProperty(key);
    const { evictions, makespan_s, ...shared } = simJson;
    expect(evictions).toBeTypeOf('number'); // an engine counter, not in records
    expect(analysis.evictions).toBeNull();
    expect(analysis.makespan_s).toBeCloseTo(makespan_s as number, 9);
    for (const [key, value] of Object.entries(shared)) expect(analysis[key]).toEqual(value);
    expect(analysis.slow.slo).toEqual({ ttft_s: 5, tpot_ms: 100 });
    // The header names the trace, which is still there: the reuse split, over every record.
    expect(analysis.reuse.matched_records).toBe(simJson.requests);
    const fractions = Object.values(analysis.reuse.fractions as Record<string, number>);
    expect(fractions.reduce((a, b) => a + b, 0)).toBeCloseTo(1);
    expect(analysis.reuse.fractions.intra_session).toBeGreaterThan(0.5);
    const causes = Object.values(analysis.slow.causes as Record<string, number>);
    expect(causes.reduce((a, b) => a + b, 0)).toBe(analysis.slow.n_slow);
  });

  it('prints tables with units, and takes --slo', () => {
    const out = kvroute(['analyze', 'run', at('sticky.rec'), '--slo', 'ttft=1s,tpot=20ms']);
    expect(out.status).toBe(0);
    expect(out.stdout).toMatch(/^sim · sticky · 4 instances · \d+ requests \(0 failed\) · [\d.]+ \w+ span\n/);
    expect(out.stdout).toMatch(/TTFT \(m?s\)/);
    expect(out.stdout).toMatch(/instance\s+requests\s+TTFT p90 \(m?s\)/);
    expect(out.stdout).toMatch(/slow requests \(TTFT > 1\.0 s or TPOT > 20 ms\): \d+ of \d+/);
    for (const cause of ['same worker overlap', 'hot worker queue', 'cache miss large append', 'unknown'])
      expect(out.stdout).toContain(cause);
    expect(out.stdout).toMatch(/intra-session\s+[\d.]+ [kM]?\s+[\d.]+%/);
    // Sim records carry the router's predictions: the prediction section.
    expect(out.stdout).toMatch(/cached tokens predicted by the router: \d+ requests with a prediction\n/);
    expect(out.stdout).toMatch(/exact [\d.]+% · mean absolute error [\d.]+ tokens/);
    expect(out.stdout).toMatch(/over \(expected, not there\)\s+\d+\s+(\d+%|-)\s+/);
    expect(out.stdout).toMatch(
      /APC predicted [\d.]+% − lost to over-prediction [\d.]+% \+ unpredicted [\d.]+% = actual [\d.]+%/,
    );
  });

  it("--json: the prediction section over every record, its actual APC the run's", () => {
    const analysis = JSON.parse(kvroute(['analyze', 'run', at('sticky.rec'), '--json', '--skip-reuse']).stdout);
    const p = analysis.prediction;
    expect(p.requests).toBe(simJson.requests);
    expect(p.without_prediction).toBe(0);
    expect(p.actual_apc).toBeCloseTo(analysis.apc, 12);
    expect(p.exact + p.over.requests + p.under.requests).toBe(p.requests);
    expect(p.exact_fraction).toBeGreaterThan(0.9);
  });

  it('--engine-state: an instance that reports a waiting queue is a hot worker', () => {
    const base = JSON.parse(kvroute(['analyze', 'run', at('sticky.rec'), '--json']).stdout);
    const lines: string[] = [];
    for (let t = 0; t <= base.makespan_s + 60; t += 1)
      for (let engine = 0; engine < 4; engine++)
        lines.push(JSON.stringify({ t, engine, running: 1, waiting: engine === 0 ? 4 : 0 }));
    writeFileSync(at('run.engine-state'), `${lines.join('\n')}\n`);
    const out = kvroute(['analyze', 'run', at('sticky.rec'), '--json', '--engine-state', at('run.engine-state')]);
    expect(out.status).toBe(0);
    const withLog = JSON.parse(out.stdout).slow;
    expect(withLog.n_slow).toBe(base.slow.n_slow);
    expect(withLog.causes.same_worker_overlap).toBe(base.slow.causes.same_worker_overlap);
    expect(withLog.causes.hot_worker_queue).toBeGreaterThan(base.slow.causes.hot_worker_queue);
  });

  it("gives the same analysis, reuse split included, with the addon's trie and with KVROUTE_NATIVE=0", () => {
    const args = ['analyze', 'run', at('lmetric.rec'), '--json'];
    const native = kvroute(args);
    const reference = spawnSync(process.execPath, [cli, ...args], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, KVROUTE_NATIVE: '0' },
    });
    expect(native.status).toBe(0);
    expect(reference.status).toBe(0);
    expect(JSON.parse(native.stdout).reuse.matched_records).toBeGreaterThan(0);
    expect(JSON.parse(reference.stdout)).toEqual(JSON.parse(native.stdout));
    const trace = ['analyze', 'trace', at('trace.jsonl'), '--json'];
    const traceReference = spawnSync(process.execPath, [cli, ...trace], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { ...process.env, KVROUTE_NATIVE: '0' },
    });
    expect(traceReference.status).toBe(0);
    expect(traceReference.stdout).toBe(kvroute(trace).stdout);
  });

  it('--skip-reuse reads the records only', () => {
    const out = kvroute(['analyze', 'run', at('sticky.rec'), '--json', '--skip-reuse']);
    expect(out.status).toBe(0);
    expect(out.stderr).toBe('');
    expect(JSON.parse(out.stdout).reuse).toBeNull();
  });

  it('reports a truncated last record and analyses the whole ones', () => {
    const bytes = readFileSync(at('sticky.rec'));
    writeFileSync(at('cut.rec'), bytes.subarray(0, bytes.length - 5));
    const out = kvroute(['analyze', 'run', at('cut.rec'), '--json']);
    expect(out.status).toBe(0);
    expect(out.stderr).toMatch(
      new RegExp(
        `^kvroute analyze run: warning: ${at('cut.rec')}: the last record is truncated \\(\\d+ bytes at byte \\d+\\); analysed the ${(simJson.requests as number) - 1} whole records\n$`,
      ),
    );
    expect(JSON.parse(out.stdout).requests).toBe((simJson.requests as number) - 1);
  });

  it('refuses a file that is not records (exit 1) and a bad --slo (exit 2)', () => {
    const notRecords = kvroute(['analyze', 'run', at('trace.jsonl')]);
    expect(notRecords.status).toBe(1);
    expect(notRecords.stderr).toMatch(new RegExp(`^kvroute analyze: ${at('trace.jsonl')}: .*record`));
    const slo = kvroute(['analyze', 'run', at('sticky.rec'), '--slo', 'ttft=soon']);
    expect(slo.status).toBe(2);
    expect(slo.stderr).toMatch(/^kvroute analyze: --slo must be ttft=SECONDS,tpot=MILLISECONDS.*got "ttft=soon"/);
  });
});

describe('kvroute analyze compare', () => {
  it('compares two runs of one trace', () => {
    const out = kvroute(['analyze', 'compare', at('sticky.rec'), at('lmetric.rec'), '--json']);
    expect(out.status).toBe(0);
    const c = JSON.parse(out.stdout);
    expect(c.matched).toBe(simJson.requests);
    expect(c.a.instances_per_session).toBe(1);
    expect(['HELPS', 'wash', 'HURTS']).toContain(c.verdict);
    const human = kvroute(['analyze', 'compare', at('sticky.rec'), at('lmetric.rec')]).stdout;
    expect(human).toMatch(/TTFT p90 \(m?s\)/);
    expect(human).toMatch(/rerouted \d+ of \d+ matched requests \([\d.]+%\)/);
    expect(human).toContain('HELPS ≤ -5%, HURTS ≥ +5%');
    expect(c.a.prediction.requests).toBe(simJson.requests);
    expect(human).toMatch(/predicted exactly\s+[\d.]+%\s+[\d.]+%/);
    expect(human).toMatch(/APC lost to over-prediction\s+[\d.]+%\s+[\d.]+%/);
  });

  it('refuses runs of two traces, naming both files (exit 1)', () => {
    const out = kvroute(['analyze', 'compare', at('sticky.rec'), at('other.rec')]);
    expect(out.status).toBe(1);
    expect(out.stderr).toContain(`${at('sticky.rec')} and ${at('other.rec')} ran different traces`);
  });
});
