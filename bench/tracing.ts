/**
 * Issue #33's tracing cost: `kvroute serve` CPU per request with OpenTelemetry tracing off and on
 * (`--otlp-endpoint` to an OTLP/HTTP sink in this process that answers 200 and drops the spans),
 * beside a second server with tracing off (the noise between two identical servers). Same stub
 * engines and load (64 connections, non-streaming chat, the bench's requests), servers alternated
 * rep by rep; the figure is each server process's CPU (user + system, /proc) per request, the
 * median over the reps. Target: tracing on adds <= 10 µs CPU per request.
 *
 *   node --import tsx bench/tracing.ts [--quick] [--out FILE]
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';

import { protoFields } from '../src/proxy/observe/otlp-proto.js';
import { closedLoop } from './lib/proxy-load.js';
import { cpuSeconds, startKvroute, startStub, type Running } from './lib/proxy-procs.js';
import { chatRequests } from './lib/proxy-requests.js';

const { values } = parseArgs({ options: { quick: { type: 'boolean' }, out: { type: 'string' } } });
const reps = values.quick ? 3 : 7;
const seconds = values.quick ? 2 : 3;

export interface TracingResult {
  workload: 'tracing';
  kind: 'tracing';
  connections: number;
  reps: number;
  requests: number;
  spans: number;
  off_cpu_us_per_req: number;
  off_again_cpu_us_per_req: number;
  on_cpu_us_per_req: number;
  added_cpu_us_per_req: number;
  off_spread_us_per_req: number;
}

/** The spans of an OTLP/HTTP protobuf request: resource_spans (1) → scope_spans (2) → spans (2). */
function countSpans(body: Uint8Array): number {
  let spans = 0;
  const inside = (bytes: Uint8Array, field: number, then: (b: Uint8Array) => void) =>
    protoFields(bytes, (f, v) => {
      if (f === field && typeof v !== 'number') then(v);
    });
  inside(body, 1, (rs) => inside(rs, 2, (ss) => inside(ss, 2, () => spans++)));
  return spans;
}

/** An OTLP/HTTP sink: counts the spans it is sent (protobuf), answers 200. */
async function otlpSink(): Promise<{ url: string; spans: () => number; close: () => void }> {
  let spans = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      spans += countSpans(Buffer.concat(chunks));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return { url: `http://127.0.0.1:${port}`, spans: () => spans, close: () => server.close() };
}

async function main(): Promise<TracingResult[]> {
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name];
  const stub = await startStub({ ports: 4, chunks: 16, chunkDelayMs: 0 });
  const sink = await otlpSink();
  const servers: Running[] = [];
  try {
    servers.push(
      await startKvroute(stub.ports, {}, 'off'),
      await startKvroute(stub.ports, { args: ['--otlp-endpoint', sink.url] }, 'on'),
      await startKvroute(stub.ports, {}, 'off again'),
    );
    const requests = chatRequests(false, 16, true);
    const load = (s: Running, secs: number) =>
      closedLoop({ port: s.port, path: '/v1/chat/completions', requests }, { connections: 64, seconds: secs });
    for (const s of servers) await load(s, 1); // warm-up
    const cpu = new Map<Running, number[]>(servers.map((s) => [s, []]));
    let total = 0;
    for (let rep = 0; rep < reps; rep++)
      for (const s of servers) {
        const before = cpuSeconds(s.workerPid);
        const run = await load(s, seconds);
        if (run.errors > 0) throw new Error(`${s.name}: ${run.errors} errors`);
        total += run.ok;
        cpu.get(s)!.push(((cpuSeconds(s.workerPid) - before) * 1e6) / Math.max(1, run.ok));
      }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const [off, on, offAgain] = servers.map((s) => median(cpu.get(s)!)) as [number, number, number];
    const round = (x: number) => Math.round(x * 10) / 10;
    const result: TracingResult = {
      workload: 'tracing',
      kind: 'tracing',
      connections: 64,
      reps,
      requests: total,
      spans: 0,
      off_cpu_us_per_req: round(off),
      off_again_cpu_us_per_req: round(offAgain),
      on_cpu_us_per_req: round(on),
      added_cpu_us_per_req: round(on - Math.min(off, offAgain)),
      off_spread_us_per_req: round(Math.abs(off - offAgain)),
    };
    for (const s of servers) await s.stop();
    servers.length = 0;
    result.spans = sink.spans();
    console.log(
      `  tracing off ${result.off_cpu_us_per_req} µs CPU/req (again: ${result.off_again_cpu_us_per_req}) · on ${result.on_cpu_us_per_req} · added ${result.added_cpu_us_per_req} µs · ${result.spans.toLocaleString('en-US')} spans exported`,
    );
    return [result];
  } finally {
    for (const s of servers) await s.stop();
    sink.close();
    await stub.stop();
  }
}

const results = await main();
if (values.out) writeFileSync(values.out, `${JSON.stringify(results, null, 2)}\n`);
