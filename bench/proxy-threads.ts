/**
 * `kvroute serve --threads 1` against `--threads 2`, and nginx with 1 and 2 workers, in the same run
 * (issue #19; docs/scale-out.md): throughput at 64 connections, non-streaming, through each to the
 * same stub backend, with the server's CPU time per request (kvroute: the whole process, every
 * thread; nginx: all its workers).
 *
 * The load generator (autocannon, one thread) and the stub (one uWS thread) share the machine's
 * cores with the server, so a second server thread competes with them: the ratio of req/s and of
 * CPU per request between 2 and 1 threads is the figure, not the absolute req/s. Legs run
 * interleaved, their order rotated each repetition; medians reported.
 *
 * Also, for the 2-thread leg: the shared routing core's lock calls and waits over the run (from its
 * /metrics), the measured contention between the threads.
 *
 *   node --import tsx bench/proxy-threads.ts [--quick] [--out FILE]   (or: npm run bench -- --only proxy-threads)
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';

import { machineInfo, printMachine } from './lib/machine.mjs';
import { closedLoop, percentiles, type Target } from './lib/proxy-load.js';
import { chatRequests } from './lib/proxy-requests.js';
import {
  cpuSeconds,
  findNginx,
  kvrouteServeAvailable,
  startKvroute,
  startNginx,
  startStub,
  type Running,
} from './lib/proxy-procs.js';
import type { ThreadsResult } from './lib/threads-report.mjs';
import { findWrk, wrkLoop } from './lib/wrk-load.js';

const STUB_PORTS = 4;
const CHUNKS = 16;
const CONNECTIONS = 64;

const { values } = parseArgs({ options: { quick: { type: 'boolean' }, out: { type: 'string' } } });
const plan = values.quick ? { reps: 1, seconds: 3, warmSeconds: 1 } : { reps: 3, seconds: 5, warmSeconds: 1.5 };
const REQUESTS = chatRequests(false, CHUNKS);
const target = (port: number): Target => ({ port, path: '/v1/chat/completions', requests: REQUESTS });

type Leg = { target: ThreadsResult['target']; threads: number; server: Running };

const cpuOf = (leg: Leg) => leg.server.workerPids.reduce((n, pid) => n + cpuSeconds(pid), 0);

/** The value of one unlabelled counter in a Prometheus exposition. */
const counter = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

async function lockCounters(port: number): Promise<{ calls: number; waits: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  return {
    calls: counter(text, 'kvroute_router_lock_calls_total'),
    waits: counter(text, 'kvroute_router_lock_waits_total'),
  };
}

async function main(): Promise<ThreadsResult[]> {
  if (!values.out) printMachine(machineInfo());
  if (!kvrouteServeAvailable()) {
    console.log('  proxy-threads: SKIPPED, dist/cli.js has no `serve` verb yet (npm run build:ts)');
    return [];
  }
  const nginx = findNginx();
  const wrk = findWrk();
  console.log(
    wrk
      ? `  client: wrk (${wrk}), one thread`
      : '  client: autocannon, one thread (wrk is not installed: with Debian apt-get install wrk the client costs the machine less per request)',
  );
  /** One closed-loop run through the client: 2xx count, errors, req/s, latency percentiles. */
  const load = async (port: number, seconds: number) => {
    if (wrk) return wrkLoop(wrk, target(port), CONNECTIONS, seconds);
    const r = await closedLoop(target(port), { connections: CONNECTIONS, seconds });
    return { ok: r.ok, errors: r.errors, rps: r.rps, ...percentiles(r.latencies) };
  };
  console.log(
    `  ${os.cpus().length} cores shared by the server, the stub (1 thread) and the load generator (1 thread); ${CONNECTIONS} connections, non-streaming, ${plan.seconds} s x ${plan.reps}`,
  );
  if (!nginx) console.log('  nginx: SKIPPED, not installed (Debian: apt-get install nginx)');
  const stub = await startStub({ ports: STUB_PORTS, chunks: CHUNKS, chunkDelayMs: 0 });
  const legs: Leg[] = [];
  try {
    for (const threads of [1, 2])
      legs.push({
        target: `kvroute-threads-${threads}` as ThreadsResult['target'],
        threads,
        server: await startKvroute(stub.ports, { args: ['--threads', String(threads)] }, `kvroute-threads-${threads}`),
      });
    if (nginx)
      for (const workers of [1, 2])
        legs.push({
          target: `nginx-${workers}` as ThreadsResult['target'],
          threads: workers,
          server: await startNginx(nginx, stub.ports, workers),
        });
    for (const leg of legs) await load(leg.server.port, plan.warmSeconds);
    const runs = new Map<Leg, Array<Awaited<ReturnType<typeof load>> & { cpuUs: number }>>(legs.map((l) => [l, []]));
    const lockBefore = await lockCounters(legs[1]!.server.port);
    for (let rep = 0; rep < plan.reps; rep++)
      for (let i = 0; i < legs.length; i++) {
        const leg = legs[(i + rep) % legs.length]!;
        const cpu0 = cpuOf(leg);
        const result = await load(leg.server.port, plan.seconds);
        const cpu = cpuOf(leg) - cpu0;
        runs.get(leg)!.push({ ...result, cpuUs: (cpu * 1e6) / Math.max(1, result.ok) });
      }
    const lockAfter = await lockCounters(legs[1]!.server.port);
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const results = legs.map((leg): ThreadsResult => {
      const rs = runs.get(leg)!;
      return {
        workload: 'proxy-threads',
        kind: 'proxy-threads',
        target: leg.target,
        threads: leg.threads,
        connections: CONNECTIONS,
        requests: rs.reduce((n, r) => n + r.ok, 0),
        errors: rs.reduce((n, r) => n + r.errors, 0),
        rps: median(rs.map((r) => r.rps)),
        cpu_us_per_req: median(rs.map((r) => r.cpuUs)),
        p50_us: median(rs.map((r) => r.p50_us)),
        p99_us: median(rs.map((r) => r.p99_us)),
        client: wrk ? 'wrk' : 'autocannon',
        ...(leg.threads === 2 && leg.target.startsWith('kvroute')
          ? { lock_calls: lockAfter.calls - lockBefore.calls, lock_waits: lockAfter.waits - lockBefore.waits }
          : {}),
        cores: os.cpus().length,
      };
    });
    for (const r of results)
      console.log(
        `  ${r.target.padEnd(18)} ${Math.round(r.rps).toLocaleString('en-US').padStart(7)} req/s  ${r.cpu_us_per_req.toFixed(1).padStart(6)} µs CPU/req  p50 ${(r.p50_us / 1000).toFixed(2)} ms  errors ${r.errors}` +
          (r.lock_calls === undefined
            ? ''
            : `  lock: ${r.lock_calls.toLocaleString('en-US')} calls, ${r.lock_waits} waited`),
      );
    return results;
  } finally {
    for (const leg of legs.reverse()) {
      const problem = await leg.server.stop();
      if (problem) console.log(`  WARNING: ${problem}`);
    }
    await stub.stop();
  }
}

const results = await main();
if (values.out) writeFileSync(values.out, `${JSON.stringify(results, null, 2)}\n`);
