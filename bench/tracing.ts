/**
 * Issue #33's tracing cost: `kvroute serve` CPU per request with OpenTelemetry tracing off and on
 * (`--otlp-endpoint` to an OTLP/HTTP collector, bench/otlp-sink.ts, in a process of its own, that
 * answers 200 and counts the spans),
 * beside a second server with tracing off (the noise between two identical servers). Same stub
 * engines and load (64 connections, non-streaming chat, the bench's requests). Each rep starts
 * three new server processes (off, on, off again), warms each, loads them one after the other (the
 * traced one between its two untraced ones) and stops them: a server process keeps a speed of its
 * own for its whole life (two identical servers differed by 2–21 µs per request, the same way round
 * in each of 12 reps, 2026-12-04), so a new draw of processes each rep turns that into noise the
 * median removes. The figure is each server process's CPU (user + system, /proc) per request. What
 * tracing adds is the median over the reps of on − (off + off again) / 2 within the rep: the
 * machine's slow drift (2026-12-04, off servers' medians moved between 76 and 147 µs in one
 * afternoon) cancels within a rep, and neither off server is preferred.
 * Within a rep the three servers' measured load is cut into slices taken in turn (off, on, off
 * again, off, on, …; 6 slices of 0.5 s by default): the shared host's busy spells last seconds, and
 * when each server's 3 s ran back to back one spell could land on one server alone (2026-12-05:
 * one rep read off 142, on 235, off again 144 µs). In turns, a spell falls on all three alike.
 * Target: tracing on adds <= 10 µs CPU per request.
 *
 * The servers are pinned to the last CPU, and this process (the load), the collector and the
 * stub engines to the others (taskset, when there are two CPUs or more): the figure is then the
 * server's own work. Unpinned, on two shared cores, the three processes contend and a server's
 * CPU per request grows with its slowness (wake-ups, cache refills): a build spinning a known
 * 5 µs per request measured +13.5 µs unpinned and about +5 pinned (2026-12-04).
 *
 *   node --import tsx bench/tracing.ts [--quick] [--reps N] [--seconds S] [--slices N] [--out FILE]
 */
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { parseArgs } from 'node:util';

import { closedLoop } from './lib/proxy-load.js';
import { cpuSeconds, pinToCpus, startKvroute, startOtlpSink, startStub, type Running } from './lib/proxy-procs.js';
import { chatRequests } from './lib/proxy-requests.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean' },
    out: { type: 'string' },
    reps: { type: 'string' },
    seconds: { type: 'string' },
    slices: { type: 'string' },
  },
});
/** A flag's value as a number `ok` accepts, or the bench stops here naming the flag (exit 2). */
function numberFlag(
  name: string,
  text: string | undefined,
  fallback: number,
  ok: (n: number) => boolean,
  what: string,
) {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (text.trim() === '' || !ok(n)) {
    console.error(`bench/tracing.ts: --${name} must be ${what}, got "${text}"`);
    process.exit(2);
  }
  return n;
}
/** A count flag (`--reps`, `--slices`): a whole number, 1 or more. */
const countFlag = (name: 'reps' | 'slices', fallback: number) =>
  numberFlag(
    name,
    values[name],
    fallback,
    (n) => Number.isInteger(n) && n >= 1,
    `a whole number of ${name}, 1 or more`,
  );
const reps = countFlag('reps', values.quick ? 3 : 9);
const slices = countFlag('slices', values.quick ? 2 : 6);
const seconds = numberFlag(
  'seconds',
  values.seconds,
  values.quick ? 2 : 3,
  (n) => Number.isFinite(n) && n > 0,
  'a number of seconds above 0',
);

export interface TracingResult {
  workload: 'tracing';
  kind: 'tracing';
  connections: number;
  reps: number;
  /** Each rep's measured load per server, cut into this many slices taken in turn. */
  slices: number;
  requests: number;
  spans: number;
  off_cpu_us_per_req: number;
  off_again_cpu_us_per_req: number;
  on_cpu_us_per_req: number;
  /** The median over the reps of on − (off + off again) / 2. */
  added_cpu_us_per_req: number;
  /** Each rep's on − (off + off again) / 2, in order. */
  added_by_rep_us: number[];
  /**
   * The median over the reps of on − (off + off again) / 2 as a share of (off + off again) / 2: the
   * ratio to the untraced request's own CPU. Tracing's cost moves with the shared machine's
   * contention, as the whole request's does, and the share moves less than the µs: two runs two
   * minutes apart on 2026-12-05 gave 9.7 µs (11.7%) with off at 85 µs, and 22.7 µs (17.6%) with
   * off at 154 µs.
   */
  added_share_of_off: number;
  /** Each server's CPU per request, rep by rep: [off, on, off again]. */
  cpu_by_rep_us: [number[], number[], number[]];
  /** The noise: the median over the reps of |off − off again| within the rep. */
  off_spread_us_per_req: number;
  /** Whether the servers had a CPU of their own (see the header). */
  pinned: boolean;
}

/** The spans the sink has counted so far. */
async function sinkSpans(sink: Running): Promise<number> {
  const res = await fetch(`http://127.0.0.1:${sink.port}/spans`);
  return Number(await res.text());
}

async function main(): Promise<TracingResult[]> {
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name];
  const stub = await startStub({ ports: 4, chunks: 16, chunkDelayMs: 0 });
  const sink = await startOtlpSink();
  const servers: Running[] = [];
  try {
    const cpus = availableParallelism();
    const others = cpus === 2 ? '0' : `0-${cpus - 2}`;
    let pinned =
      cpus >= 2 &&
      pinToCpus(process.pid, others) &&
      pinToCpus(stub.workerPid, others) &&
      pinToCpus(sink.workerPid, others);
    const requests = chatRequests(false, 16, true);
    const load = (s: Running, secs: number) =>
      closedLoop({ port: s.port, path: '/v1/chat/completions', requests }, { connections: 64, seconds: secs });
    const legs = ['off', 'on', 'off again'] as const;
    const cpu = new Map<string, number[]>(legs.map((leg) => [leg, []]));
    let total = 0;
    for (let rep = 0; rep < reps; rep++) {
      // New server processes every rep: two identical servers started side by side kept a gap of
      // their own for their whole life (2–21 µs per request, the same sign in each of 12 reps,
      // 2026-12-04), which a rep-by-rep pairing of the same processes cannot cancel.
      for (const leg of legs)
        servers.push(
          await startKvroute(
            stub.ports,
            leg === 'on' ? { args: ['--otlp-endpoint', `http://127.0.0.1:${sink.port}`] } : {},
            leg,
          ),
        );
      pinned &&= cpus >= 2 && servers.every((s) => pinToCpus(s.workerPid, String(cpus - 1)));
      for (const s of servers) await load(s, 1); // warm-up
      const used = servers.map(() => ({ cpu: 0, ok: 0 }));
      for (let slice = 0; slice < slices; slice++)
        for (const [i, s] of servers.entries()) {
          const before = cpuSeconds(s.workerPid);
          const run = await load(s, seconds / slices);
          if (run.errors > 0) throw new Error(`${s.name}: ${run.errors} errors`);
          used[i]!.cpu += cpuSeconds(s.workerPid) - before;
          used[i]!.ok += run.ok;
        }
      for (const [i, s] of servers.entries()) {
        total += used[i]!.ok;
        cpu.get(s.name)!.push((used[i]!.cpu * 1e6) / Math.max(1, used[i]!.ok));
      }
      for (const s of servers.splice(0)) await s.stop();
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const [off, on, offAgain] = legs.map((leg) => median(cpu.get(leg)!)) as [number, number, number];
    const round = (x: number) => Math.round(x * 10) / 10;
    const [offByRep, onByRep, offAgainByRep] = legs.map((leg) => cpu.get(leg)!) as [number[], number[], number[]];
    const offMeanByRep = offByRep.map((x, rep) => (x + offAgainByRep[rep]!) / 2);
    const addedByRep = onByRep.map((x, rep) => x - offMeanByRep[rep]!);
    const result: TracingResult = {
      workload: 'tracing',
      kind: 'tracing',
      connections: 64,
      reps,
      slices,
      requests: total,
      spans: 0,
      off_cpu_us_per_req: round(off),
      off_again_cpu_us_per_req: round(offAgain),
      on_cpu_us_per_req: round(on),
      added_cpu_us_per_req: round(median(addedByRep)),
      added_by_rep_us: addedByRep.map(round),
      added_share_of_off: Math.round(median(addedByRep.map((x, rep) => x / offMeanByRep[rep]!)) * 1000) / 1000,
      cpu_by_rep_us: [offByRep.map(round), onByRep.map(round), offAgainByRep.map(round)],
      off_spread_us_per_req: round(median(offByRep.map((x, rep) => Math.abs(x - offAgainByRep[rep]!)))),
      pinned,
    };
    result.spans = await sinkSpans(sink);
    console.log(
      `  tracing off ${result.off_cpu_us_per_req} µs CPU/req (again: ${result.off_again_cpu_us_per_req}) · on ${result.on_cpu_us_per_req} · added ${result.added_cpu_us_per_req} µs, ${(result.added_share_of_off * 100).toFixed(1)}% of off (median of the reps' on − mean of their offs: ${result.added_by_rep_us.join(', ')}) · ${result.spans.toLocaleString('en-US')} spans exported · ${pinned ? 'servers pinned to a CPU of their own' : 'not pinned'}`,
    );
    return [result];
  } finally {
    for (const s of servers) await s.stop();
    await sink.stop();
    await stub.stop();
  }
}

const results = await main();
if (values.out) writeFileSync(values.out, `${JSON.stringify(results, null, 2)}\n`);
