/**
 * Flow control in the simulator (src/sim/sim-flow.ts, docs/flow-control.md): the proxy's own
 * FlowController between arrival and route, on the virtual clock. With room for every request it
 * changes no decision; on an overloaded fleet fair queueing keeps a flooding tenant from delaying
 * the others (where a FIFO does not), the high class goes first, and requests past their deadline
 * are refused and recorded, never lost.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { runMetrics } from '../src/analysis/run-metrics.js';
import { simulate, type SimulationOptions } from '../src/sim/simulator.js';
import type { RequestRecord } from '../src/trace/records.js';
import { readTrace } from '../src/trace/read-trace.js';
import type { TraceRequest } from '../src/trace/types.js';
import { formatTraceLine } from '../src/trace/write-trace.js';

/** Sessionless requests of 2,048 fresh tokens each, per tenant at its own rate (req/s), for `seconds`. */
function tenantTrace(
  rates: Record<string, number>,
  seconds: number,
  priority?: Record<string, string>,
): TraceRequest[] {
  const out: TraceRequest[] = [];
  let id = 1;
  for (const [tenant, rate] of Object.entries(rates))
    for (let k = 0; k < seconds * rate; k++) {
      const hashIds = Array.from({ length: 128 }, () => id++);
      out.push({
        session: `${tenant}-${k}`,
        turn: 1,
        arrival: k / rate,
        inputLength: 128 * 16,
        outputLength: 64,
        hashIds,
        blockSize: 16,
        sessionless: true,
        tenant,
        ...(priority?.[tenant] === undefined ? {} : { priority: priority[tenant] }),
      });
    }
  return out.sort((a, b) => a.arrival - b.arrival || a.session.localeCompare(b.session));
}

const BASE: SimulationOptions = { policy: 'min_ttft', instances: 4 };
const ttftP90 = (records: RequestRecord[]): number => runMetrics(records).ttft_s.p90;
const ok = (records: RequestRecord[]) => records.filter((r) => r.status === undefined);

describe('flow control in the simulator', () => {
  it('sheds at 3x overload: admitted TTFT p90 within the SLO, lowest class shed most; without it TTFT diverges', () => {
    // The 4-instance fleet sustains about 22 requests/s of these; 66/s is 3x.
    const trace = tenantTrace({ a: 10, b: 20, c: 36 }, 30, { a: 'high', b: 'normal', c: 'low' });
    const slo = 1_000;
    const unshed = simulate(trace, { ...BASE, flow: { maxInFlight: 0 } }).records;
    const shed = simulate(trace, { ...BASE, flow: { maxInFlight: 0, config: { shedding: { sloMs: slo } } } }).records;
    expect(unshed.every((r) => r.status === undefined)).toBe(true);
    expect(ttftP90(unshed)).toBeGreaterThan((10 * slo) / 1000);
    expect(ttftP90(ok(shed))).toBeLessThanOrEqual(slo / 1000);
    const shedShare = (priority: string): number => {
      const mine = shed.filter((r) => r.priority === priority);
      return mine.filter((r) => r.status === 503 && r.error === 'shed').length / mine.length;
    };
    expect(shedShare('low')).toBeGreaterThan(shedShare('normal'));
    expect(shedShare('normal')).toBeGreaterThan(shedShare('high'));
    expect(shedShare('high')).toBeLessThan(0.2);
    expect(shed.filter((r) => r.status !== undefined && r.error !== 'shed')).toEqual([]);
  });

  it('changes nothing when every request finds a slot', () => {
    const trace = tenantTrace({ a: 1, b: 1 }, 30);
    const plain = simulate(trace, BASE).records;
    const flowed = simulate(trace, { ...BASE, flow: { maxInFlight: 10_000 } }).records;
    const withoutFlow = (r: RequestRecord) => {
      const copy = { ...r };
      delete copy.tenant;
      delete copy.priority;
      delete copy.queued_s;
      return copy;
    };
    expect(flowed.map(withoutFlow)).toEqual(plain);
    for (const r of flowed) expect(r).toMatchObject({ priority: 'normal', queued_s: 0 });
    expect(new Set(flowed.map((r) => r.tenant))).toEqual(new Set(['a', 'b']));
  });

  it('keeps a flooding tenant from delaying the others, where one FIFO does not', () => {
    const rates = { noisy: 20, q1: 2, q2: 2, q3: 2 };
    const trace = tenantTrace(rates, 60);
    const flow = { maxInFlight: 16 };
    const alone = ttftP90(simulate(tenantTrace({ q1: 2, q2: 2, q3: 2 }, 60), { ...BASE, flow }).records);
    const fair = simulate(trace, { ...BASE, flow }).records;
    const fifo = simulate(
      trace.map((r) => ({ ...r, tenant: 'everyone', session: r.session })),
      { ...BASE, flow },
    ).records;
    const quiet = (records: RequestRecord[]) => ok(records).filter((r) => !r.session.startsWith('noisy'));
    const fairQuiet = ttftP90(quiet(fair));
    const fifoQuiet = ttftP90(quiet(fifo));
    // The quiet tenants wait behind the flood in one FIFO (tens of seconds), not in fair queueing.
    expect(fifoQuiet).toBeGreaterThan(10);
    expect(fairQuiet).toBeLessThan(fifoQuiet / 10);
    expect(fairQuiet).toBeLessThan(alone + 1);
    // Nothing is lost: every request has a record, answered or refused with its cause.
    expect(fair).toHaveLength(trace.length);
    for (const r of fair.filter((r) => r.status !== undefined))
      expect(r).toMatchObject({ status: 429, error: 'queue_timeout', instance: -1, tenant: 'noisy' });
  });

  it('serves the high class first under overload', () => {
    const trace = tenantTrace({ batch: 20, chat: 3 }, 40, { batch: 'low', chat: 'high' });
    const records = simulate(trace, { ...BASE, flow: { maxInFlight: 16 } }).records;
    const byClass = (priority: string) => ok(records).filter((r) => r.priority === priority);
    expect(ttftP90(byClass('high'))).toBeLessThan(1);
    expect(ttftP90(byClass('low'))).toBeGreaterThan(5);
  });

  it('refuses a request whose class it does not know, naming it', () => {
    const trace = tenantTrace({ a: 1 }, 2, { a: 'urgent' });
    expect(() => simulate(trace, { ...BASE, flow: { maxInFlight: 4 } })).toThrow(
      /^priority of session a-0 turn 1 must be one of high, normal, low, got "urgent"$/,
    );
    expect(() => simulate(trace, { ...BASE, flow: { maxInFlight: -1 } })).toThrow(/flow\.maxInFlight/);
  });
});

describe('a trace’s tenant and priority fields', () => {
  it('read and write back in both formats; a bad one names its line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-flow-trace-'));
    const [first, second] = tenantTrace({ acme: 1, beta: 1 }, 1, { acme: 'high' });
    for (const format of ['session', 'mooncake'] as const) {
      const path = join(dir, `${format}.jsonl`);
      writeFileSync(path, `${formatTraceLine(first!, format)}\n${formatTraceLine(second!, format)}\n`);
      const read: TraceRequest[] = [];
      for await (const request of readTrace(path, { format })) read.push(request);
      expect(read.map((r) => [r.tenant, r.priority])).toEqual([
        ['acme', 'high'],
        ['beta', undefined],
      ]);
    }
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(
      bad,
      '{"session_id": "s", "timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1], "tenant": ""}\n',
    );
    await expect(async () => {
      for await (const _ of readTrace(bad)) void _;
    }).rejects.toThrow(/line 1: tenant: must be a non-empty string or an integer, got ""/);
  });
});

describe('kvroute sim run --max-in-flight --flow', () => {
  const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
  const run = (...args: string[]) =>
    spawnSync(process.execPath, [cli, 'sim', 'run', ...args], { encoding: 'utf8', timeout: 60_000 });

  it('prints the per-tenant table and writes it in --json; a bad flow file is a usage error naming the key', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvroute-sim-flow-'));
    const trace = join(dir, 'tenants.jsonl');
    writeFileSync(
      trace,
      `${tenantTrace({ noisy: 20, quiet: 2 }, 20)
        .map((r) => formatTraceLine(r, 'session'))
        .join('\n')}\n`,
    );
    const flow = join(dir, 'flow.yaml');
    writeFileSync(flow, 'tenants:\n  quiet: { weight: 2 }\n');
    const table = run('--trace', trace, '--instances', '4', '--max-in-flight', '16', '--flow', flow);
    expect(table.status).toBe(0);
    expect(table.stdout).toMatch(/^ {2}tenant noisy +400 /m);
    expect(table.stdout).toMatch(/^ {2}tenant quiet +40 +0 /m);
    expect(table.stdout).toContain("Jain's fairness index of tokens served over the tenants");
    const json = JSON.parse(run('--trace', trace, '--instances', '4', '--max-in-flight', '16', '--json').stdout) as {
      flow: { max_in_flight: number };
      flow_metrics: { tenants: Array<{ name: string; requests: number }> };
    };
    expect(json.flow).toEqual({ max_in_flight: 16 });
    expect(json.flow_metrics.tenants.map((t) => [t.name, t.requests])).toEqual([
      ['noisy', 400],
      ['quiet', 40],
    ]);
    writeFileSync(flow, 'tenants:\n  quiet: { weight: 0 }\n');
    const bad = run('--trace', trace, '--max-in-flight', '16', '--flow', flow);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain(`--flow ${flow}: flow.tenants.quiet.weight must be a number > 0, got 0`);
    const alone = run('--trace', trace, '--queue-timeout', '100');
    expect(alone.status).toBe(2);
    expect(alone.stderr).toContain('--queue-timeout needs --max-in-flight N');
  });
});
