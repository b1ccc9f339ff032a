/**
 * Workload (issues #6, #13): what the proxy costs a request. The same load goes straight to a
 * stub backend (the baseline, `direct`), through nginx (Debian's, one worker), through the `floor`
 * relay bare and with the steps every cache-aware router must take (`floor-steps`: forward the
 * headers, parse the body and its ids, route with the native Router), and through `kvroute
 * serve` (policy unified) three ways: `kvroute` as it ships, with the other upstream client
 * (`kvroute-h1` or `kvroute-undici`), and on Node's http server (`kvroute-node`); all on
 * loopback, in one run, the legs interleaved repetition by repetition so that drift on the shared
 * machine hits each alike. The targets are checked on `kvroute` (the default), and the 1,000
 * streams on both server modes; the others are reported beside it.
 *
 * The floor (bench/proxy-floor.mjs) is the bare relay any uWebSockets.js + Node proxy pays before
 * doing any work of its own: body read whole, round-robin, one write on a pooled node:net socket,
 * the response parsed just enough to relay it; no JSON parsing, routing, metrics, header
 * forwarding, timeouts or retries. kvroute − floor is what kvroute's own code costs; floor − nginx
 * what the architecture (a JS event loop behind uWS) costs against a C proxy.
 *
 * - latency: 1 connection, non-streaming, a fixed count of sequential requests: no queueing, so
 *   proxy p50 − direct p50 is the latency the proxy adds. Target: kvroute adds <= 150 µs at p50.
 * - throughput: autocannon at 64 connections, non-streaming and streaming (the stub writes the 16
 *   SSE events in one HTTP chunk, so every leg hands the client the same framing): req/s (median
 *   of the repetitions) and the kvroute/nginx ratio (reported). Target: kvroute's server CPU per
 *   request at most 20 µs above floor-steps'.
 * - 1,000 concurrent streams: 16 chunks paced STREAM_CHUNK_DELAY_MS apart, each read to [DONE]
 *   and checked, kept 1,000 in flight for a while. Target: zero errors or incomplete streams.
 * Also per leg: the CPU time the server process spent per request (for nginx, its worker), which
 * the other load on the machine disturbs less than req/s.
 *
 *   node --import tsx bench/proxy.ts [--quick] [--out FILE]      (or: npm run bench -- --only proxy)
 *
 * nginx is skipped with a message where it is not installed; the kvroute leg is skipped with a
 * message while dist/cli.js has no `serve` verb.
 */
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';

import { machineInfo, printMachine } from './lib/machine.mjs';
import { closedLoop, openStreams, percentiles, type Target } from './lib/proxy-load.js';
import { chatRequests } from './lib/proxy-requests.js';
import {
  cpuSeconds,
  findNginx,
  kvrouteLegName,
  machineBusySeconds,
  kvrouteServeAvailable,
  startFloor,
  startKvroute,
  startNginx,
  startStub,
  type KvrouteLeg,
  type Running,
} from './lib/proxy-procs.js';
import { PROXY_DEFAULTS } from '../src/proxy/proxy-options.js';
import type { ProxyResult } from './lib/proxy-report.mjs';

/**
 * kvroute as it ships (the defaults), with the other upstream client, and on Node's http server.
 * The targets are checked on the default leg (and the 1,000 streams on both server modes).
 */
const KVROUTE_LEGS: KvrouteLeg[] = [
  {},
  { upstream: PROXY_DEFAULTS.upstream === 'h1' ? 'undici' : 'h1' },
  { http: 'node' },
];
/** The floor with the work no cache-aware router can skip (lib/floor-steps.mjs). */
const FLOOR_STEPS = ['headers', 'parse', 'route'];
const STUB_PORTS = 4;
const CHUNKS = 16;
const STREAM_CHUNK_DELAY_MS = 50;
const STREAMS = 1000;

const { values } = parseArgs({ options: { quick: { type: 'boolean' }, out: { type: 'string' } } });
const quick = values.quick === true;
const plan = quick
  ? { reps: 1, latencyRequests: 1000, loopSeconds: 2, warmSeconds: 0.5, streamSeconds: 3 }
  : { reps: 3, latencyRequests: 3000, loopSeconds: 4, warmSeconds: 1, streamSeconds: 8 };

const REQUESTS = { plain: chatRequests(false, CHUNKS), stream: chatRequests(true, CHUNKS) };
const target = (port: number, stream: boolean): Target => ({
  port,
  path: '/v1/chat/completions',
  requests: stream ? REQUESTS.stream : REQUESTS.plain,
});

type Leg = { name: ProxyResult['target']; server: Running; stub: Running };

/**
 * Starts measuring CPU around one run of one leg; the returned function stops and gives the
 * server's CPU seconds and the share of the machine's CPU that processes outside the bench (the
 * load generator, the stub and the server) used meanwhile, in percent.
 */
function cpuMeter(leg: Leg): () => { server: number; othersPct: number } {
  const pids = [...new Set([leg.server.workerPid, leg.stub.workerPid])];
  const ours = () => pids.reduce((n, pid) => n + cpuSeconds(pid), 0);
  const wall0 = performance.now();
  const busy0 = machineBusySeconds();
  const self0 = process.cpuUsage();
  const server0 = cpuSeconds(leg.server.workerPid);
  const ours0 = ours();
  return () => {
    const wall = (performance.now() - wall0) / 1000;
    const self = process.cpuUsage(self0);
    const bench = ours() - ours0 + (self.user + self.system) / 1e6;
    const others = Math.max(0, machineBusySeconds() - busy0 - bench);
    return {
      server: cpuSeconds(leg.server.workerPid) - server0,
      othersPct: (100 * others) / (wall * os.cpus().length),
    };
  };
}
const fmt = (us: number) => (Math.abs(us) >= 1000 ? `${(us / 1000).toFixed(2)} ms` : `${us.toFixed(1)} µs`);
const signed = (us: number) => `${us < 0 ? '−' : '+'}${fmt(Math.abs(us))}`;
const pad = (s: string, n: number) => s.padEnd(n);

async function main(): Promise<ProxyResult[]> {
  if (!values.out) printMachine(machineInfo());
  const nginx = findNginx();
  const kvroute = kvrouteServeAvailable();
  console.log(
    `  load average ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')} at start (${os.cpus().length} cores)`,
  );
  console.log(`  stub: uWebSockets.js, ${STUB_PORTS} ports in one process; client: autocannon / node:http`);
  if (!nginx) console.log('  nginx: SKIPPED, not installed (Debian: apt-get install nginx); no kvroute/nginx ratio');
  else console.log(`  nginx: ${nginx}, worker_processes 1 (kvroute serves from one event loop)`);
  console.log(
    '  floor: bench/proxy-floor.mjs, bare uWebSockets.js + node:net relay (no parsing, routing, metrics, retries): the lower bound of the architecture',
  );
  if (!kvroute) console.log('  kvroute: SKIPPED, dist/cli.js has no `serve` verb yet (npm run build:ts)');
  console.log(
    "  fairness: stub, proxy and load generator share this machine's cores; a proxy leg runs 3 busy processes, the direct leg 2",
  );
  const results: ProxyResult[] = [];
  await withLegs({ chunkDelayMs: 0 }, nginx, kvroute, async (legs) => {
    for (const leg of legs) {
      await closedLoop(target(leg.server.port, false), { connections: 64, seconds: plan.warmSeconds });
      await closedLoop(target(leg.server.port, true), { connections: 64, seconds: plan.warmSeconds });
    }
    results.push(...(await latency(legs)));
    results.push(...(await throughput(legs, false)));
    results.push(...(await throughput(legs, true)));
  });
  await withLegs({ chunkDelayMs: STREAM_CHUNK_DELAY_MS }, nginx, kvroute, async (legs) => {
    results.push(...(await streams(legs)));
  });
  return results;
}

/** Starts the stub, nginx, the floor and kvroute, runs `body`, and stops them all whatever happens. */
async function withLegs(
  stubOptions: { chunkDelayMs: number },
  nginx: string | undefined,
  kvroute: boolean,
  body: (legs: Leg[]) => Promise<void>,
) {
  const stub = await startStub({ ports: STUB_PORTS, chunks: CHUNKS, ...stubOptions });
  const legs: Leg[] = [{ name: 'direct', server: stub, stub }];
  try {
    if (nginx) legs.push({ name: 'nginx', server: await startNginx(nginx, stub.ports), stub });
    legs.push({ name: 'floor', server: await startFloor(stub.ports), stub });
    legs.push({ name: 'floor-steps', server: await startFloor(stub.ports, FLOOR_STEPS), stub });
    if (kvroute)
      for (const leg of KVROUTE_LEGS) {
        const name = kvrouteLegName(leg, PROXY_DEFAULTS) as Leg['name'];
        legs.push({ name, server: await startKvroute(stub.ports, leg, name), stub });
      }
    await body(legs);
  } finally {
    for (const leg of legs.reverse()) {
      const problem = await leg.server.stop();
      if (problem) console.log(`  WARNING: ${problem}`);
    }
  }
}

/** Repetitions with the legs' order rotated each time; `run` returns one leg's figures. */
async function interleave<T>(legs: Leg[], run: (leg: Leg) => Promise<T>): Promise<Map<Leg['name'], T[]>> {
  const byLeg = new Map<Leg['name'], T[]>(legs.map((l) => [l.name, []]));
  for (let rep = 0; rep < plan.reps; rep++)
    for (let i = 0; i < legs.length; i++) {
      const leg = legs[(i + rep) % legs.length]!;
      byLeg.get(leg.name)!.push(await run(leg));
    }
  return byLeg;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const pooled = (arrays: Float64Array[]) => {
  const all = new Float64Array(arrays.reduce((n, a) => n + a.length, 0));
  let at = 0;
  for (const a of arrays) all.set(a, (at += a.length) - a.length);
  return all;
};

async function latency(legs: Leg[]): Promise<ProxyResult[]> {
  console.log(
    `  latency, 1 connection, non-streaming: ${plan.latencyRequests.toLocaleString('en-US')} sequential requests x ${plan.reps}, pooled; added = leg − direct`,
  );
  const runs = await interleave(legs, (leg) =>
    measured(leg, () => closedLoop(target(leg.server.port, false), { connections: 1, amount: plan.latencyRequests })),
  );
  return report(legs, runs, 'latency', 1, false);
}

async function throughput(legs: Leg[], stream: boolean): Promise<ProxyResult[]> {
  console.log(
    `  throughput, 64 connections, ${stream ? `streaming (${CHUNKS} SSE events in one write)` : 'non-streaming'}: ${plan.loopSeconds} s x ${plan.reps}, req/s median`,
  );
  const runs = await interleave(legs, (leg) =>
    measured(leg, () => closedLoop(target(leg.server.port, stream), { connections: 64, seconds: plan.loopSeconds })),
  );
  return report(legs, runs, stream ? 'stream-rps' : 'rps', 64, stream);
}

type Measured = Awaited<ReturnType<typeof closedLoop>> & { cpu_us_per_req: number; others_cpu_pct: number };

/** One run with the server's CPU time around it. */
async function measured(leg: Leg, run: () => ReturnType<typeof closedLoop>): Promise<Measured> {
  const stop = cpuMeter(leg);
  const result = await run();
  const cpu = stop();
  return { ...result, cpu_us_per_req: (cpu.server * 1e6) / Math.max(1, result.ok), others_cpu_pct: cpu.othersPct };
}

function report(
  legs: Leg[],
  runs: Map<Leg['name'], Measured[]>,
  scenario: ProxyResult['scenario'],
  connections: number,
  streaming: boolean,
): ProxyResult[] {
  const out: ProxyResult[] = [];
  for (const leg of legs) {
    const rs = runs.get(leg.name)!;
    const { p50_us, p99_us } = percentiles(pooled(rs.map((r) => r.latencies)));
    out.push({
      workload: 'proxy',
      kind: 'proxy',
      scenario,
      target: leg.name,
      connections,
      streaming,
      requests: rs.reduce((n, r) => n + r.ok, 0),
      errors: rs.reduce((n, r) => n + r.errors, 0),
      rps: median(rs.map((r) => r.rps)),
      p50_us,
      p99_us,
      cpu_us_per_req: median(rs.map((r) => r.cpu_us_per_req)),
      others_cpu_pct: median(rs.map((r) => r.others_cpu_pct)),
    });
  }
  printRows(out);
  return out;
}

function printRows(rows: ProxyResult[]) {
  const direct = rows.find((r) => r.target === 'direct');
  const nginx = rows.find((r) => r.target === 'nginx');
  for (const r of rows) {
    const added =
      direct && r !== direct
        ? `  added p50 ${signed(r.p50_us - direct.p50_us)} p99 ${signed(r.p99_us - direct.p99_us)}`
        : '';
    const ratio =
      r.target.startsWith('kvroute') && nginx ? `  ${r.target}/nginx ${(r.rps / nginx.rps).toFixed(2)}x` : '';
    console.log(
      `    ${pad(r.target, 10)} ${Math.round(r.rps).toLocaleString('en-US').padStart(7)} req/s  p50 ${pad(fmt(r.p50_us), 9)} p99 ${pad(fmt(r.p99_us), 9)}` +
        ` errors ${r.errors}  server CPU ${r.cpu_us_per_req.toFixed(1)} µs/req  others ${r.others_cpu_pct.toFixed(0)}%${added}${ratio}`,
    );
  }
  if (direct)
    for (const r of rows)
      if (r !== direct && r.connections > 1 && r.rps >= 0.9 * direct.rps)
        console.log(
          `    note: ${r.target} reaches ${((100 * r.rps) / direct.rps).toFixed(0)}% of direct: the load generator may be the limit`,
        );
  const floor = rows.find((r) => r.target === 'floor');
  const kvroutes = rows.filter((r) => r.target.startsWith('kvroute'));
  if (floor && kvroutes.length > 0 && floor.connections > 1)
    console.log(
      `    ${kvroutes.map((k) => `${k.target} − floor: ${signed(k.cpu_us_per_req - floor.cpu_us_per_req)}`).join(', ')} server CPU/req (kvroute's own code)` +
        (nginx ? `; floor − nginx: ${signed(floor.cpu_us_per_req - nginx.cpu_us_per_req)} (the architecture)` : ''),
    );
}

async function streams(legs: Leg[]): Promise<ProxyResult[]> {
  console.log(
    `  ${STREAMS.toLocaleString('en-US')} concurrent streams: ${CHUNKS} chunks ${STREAM_CHUNK_DELAY_MS} ms apart, each read to [DONE] and checked, ${plan.streamSeconds} s then drained`,
  );
  const out: ProxyResult[] = [];
  for (const leg of legs) {
    const stop = cpuMeter(leg);
    const r = await openStreams(target(leg.server.port, true), {
      streams: STREAMS,
      seconds: plan.streamSeconds,
      chunks: CHUNKS,
      timeoutMs: 30_000,
    });
    const cpu = stop();
    const total = percentiles(r.total);
    const ttfb = percentiles(r.ttfb);
    const result: ProxyResult = {
      workload: 'proxy',
      kind: 'proxy',
      scenario: 'streams',
      target: leg.name,
      connections: STREAMS,
      streaming: true,
      requests: r.complete,
      errors: r.errors,
      incomplete: r.incomplete,
      rps: r.streamsPerSecond,
      p50_us: total.p50_us,
      p99_us: total.p99_us,
      ttfb_p50_us: ttfb.p50_us,
      ttfb_p99_us: ttfb.p99_us,
      cpu_us_per_req: (cpu.server * 1e6) / Math.max(1, r.complete),
      others_cpu_pct: cpu.othersPct,
    };
    console.log(
      `    ${pad(leg.name, 8)} ${r.complete.toLocaleString('en-US').padStart(7)} streams (${Math.round(r.streamsPerSecond)}/s)  errors ${r.errors}  incomplete ${r.incomplete}` +
        `  first byte p50 ${fmt(ttfb.p50_us)} p99 ${fmt(ttfb.p99_us)}  whole stream p50 ${fmt(total.p50_us)} p99 ${fmt(total.p99_us)}` +
        `  server CPU ${result.cpu_us_per_req.toFixed(0)} µs/stream  others ${cpu.othersPct.toFixed(0)}%`,
    );
    if (r.firstError) console.log(`      first failure: ${r.firstError}`);
    out.push(result);
  }
  return out;
}

const started = Date.now();
main().then(
  (results) => {
    console.log(`  proxy: done in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    if (values.out) writeFileSync(values.out, JSON.stringify(results));
  },
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
