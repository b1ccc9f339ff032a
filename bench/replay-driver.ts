/**
 * Workload (issue #15): what `kvroute replay` itself costs, so its figures measure the target and
 * not the driver. The driver (`replay()` from dist/, in this process) drives bench/proxy-stub.ts
 * (uWebSockets.js, in a child: its CPU is not counted), which answers every completion at once
 * with a 4-chunk SSE stream, usage and [DONE].
 *
 * Legs, each over N requests of one 16-token block and 4 output tokens (tiny prompts: prompt text
 * is built per request, and a long prompt costs what its bytes cost; the bench measures dispatch,
 * HTTP, SSE parsing and records):
 * - `session`: 256 sessions of N / 256 turns, all arriving at 0: a closed loop, 256 in flight;
 * - `poisson`: open loop at 10^6 requests/s, i.e. as fast as the driver can send (undici queues
 *   beyond the 256 sockets).
 * Records go to a file in the OS temp directory (RecordWriter, as a real run).
 *
 * Reported per leg: requests/s (N ÷ wall time, median of the repetitions) and the driver's CPU
 * (process.cpuUsage, user + system) per request. Targets: >= 5,000 requests/s, <= 100 µs of CPU
 * per request. Bounded: N = 20,000 (5,000 with --quick), 3 repetitions (1 with --quick), a
 * 60 s --duration per run.
 *
 *   node --import tsx bench/replay-driver.ts [--quick] [--out FILE]
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

import { replay } from '../dist/entries/replay.js';
import type { TraceRequest } from '../dist/entries/trace.js';
import { machineInfo, printMachine } from './lib/machine.mjs';
import { startStub } from './lib/proxy-procs.js';

export interface ReplayDriverResult {
  workload: 'replay-driver';
  kind: 'replay-driver';
  leg: 'session' | 'poisson';
  requests: number;
  repetitions: number;
  requests_per_s: number;
  cpu_us_per_request: number;
  errors: number;
}

const SESSIONS = 256;

function trace(count: number): TraceRequest[] {
  const turns = Math.ceil(count / SESSIONS);
  const requests: TraceRequest[] = [];
  for (let t = 1; t <= turns; t++)
    for (let s = 0; s < SESSIONS && requests.length < count; s++)
      requests.push({
        session: `s${s}`,
        turn: t,
        arrival: 0,
        inputLength: 16,
        outputLength: 4,
        hashIds: [s * 1_000_000 + t],
        blockSize: 16,
      });
  return requests;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const { values } = parseArgs({ options: { quick: { type: 'boolean' }, out: { type: 'string' } } });
if (!values.out) printMachine(machineInfo());
const quick = values.quick === true;
const count = quick ? 5_000 : 20_000;
const repetitions = quick ? 1 : 3;
const stub = await startStub({ ports: 1, chunks: 4, chunkDelayMs: 0 });
const scratch = mkdtempSync(join(tmpdir(), 'kvroute-replay-bench-'));
const results: ReplayDriverResult[] = [];
try {
  const requests = trace(count);
  const target = `http://127.0.0.1:${stub.port}`;
  // One untimed warm-up run (JIT, sockets).
  await replay({ trace: 'bench', requests: requests.slice(0, 2_000), target, duration: 60 });
  for (const leg of ['session', 'poisson'] as const) {
    const rates: number[] = [];
    const cpus: number[] = [];
    let errors = 0;
    for (let rep = 0; rep < repetitions; rep++) {
      const cpu = process.cpuUsage();
      const started = performance.now();
      const result = await replay({
        trace: 'bench',
        requests,
        target,
        records: join(scratch, `${leg}-${rep}.rec`),
        duration: 60,
        ...(leg === 'poisson' ? { dispatch: { mode: 'poisson', rate: 1e6, seed: 1 } } : {}),
      });
      const wall = (performance.now() - started) / 1000;
      const used = process.cpuUsage(cpu);
      rates.push(result.done / wall);
      cpus.push((used.user + used.system) / result.done);
      errors += result.errors;
    }
    const r: ReplayDriverResult = {
      workload: 'replay-driver',
      kind: 'replay-driver',
      leg,
      requests: count,
      repetitions,
      requests_per_s: Math.round(median(rates)),
      cpu_us_per_request: Math.round(median(cpus) * 10) / 10,
      errors,
    };
    console.log(
      `  ${leg.padEnd(8)} ${r.requests_per_s.toLocaleString('en-US').padStart(7)} req/s  ${r.cpu_us_per_request.toFixed(1).padStart(6)} µs CPU/request  (${count} requests × ${repetitions}, ${errors} errors)`,
    );
    results.push(r);
  }
} finally {
  await stub.stop();
  rmSync(scratch, { recursive: true, force: true });
}
if (values.out) writeFileSync(values.out, JSON.stringify(results));
