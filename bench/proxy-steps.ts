/**
 * Where kvroute's CPU per request goes, step by step (issue #6): the floor relay
 * (bench/proxy-floor.mjs) with the work any cache-aware router must do per request added one
 * step at a time (lib/floor-steps.mjs: forward the client's headers, parse the body and its
 * block ids, route with kvroute's native Router), beside `kvroute serve` with each upstream
 * client. Same stub, same load (64 connections, non-streaming, the bench's chat requests), the
 * servers alternated run by run; the figure is the server process's CPU per request (user +
 * system from /proc), the median over the repetitions.
 *
 *   node --import tsx bench/proxy-steps.ts [--reps N] [--seconds S] [--prompt-only]
 *
 * `--prompt-only` sends the requests without `hash_ids`, so the routers hash the prompt.
 *
 * A diagnostic, not a workload of `npm run bench`: it prints and records nothing. Needs
 * `npm run build` (the route step and the kvroute legs use dist/).
 */
import { parseArgs } from 'node:util';

import { machineInfo, printMachine } from './lib/machine.mjs';
import { closedLoop } from './lib/proxy-load.js';
import { cpuSeconds, startFloor, startKvroute, startStub, type Running } from './lib/proxy-procs.js';
import { chatRequests } from './lib/proxy-requests.js';

const { values } = parseArgs({
  options: { reps: { type: 'string' }, seconds: { type: 'string' }, 'prompt-only': { type: 'boolean' } },
});
const reps = Number(values.reps ?? 5);
const seconds = Number(values.seconds ?? 3);
if (!(Number.isInteger(reps) && reps > 0)) throw new Error(`--reps must be a positive integer, got ${values.reps}`);
if (!(seconds > 0)) throw new Error(`--seconds must be positive, got ${values.seconds}`);

const STEPS: readonly (readonly string[])[] = [[], ['headers'], ['headers', 'parse'], ['headers', 'parse', 'route']];
const requests = chatRequests(false, 16, values['prompt-only'] !== true);

async function main() {
  printMachine(machineInfo());
  const stub = await startStub({ ports: 4, chunks: 16, chunkDelayMs: 0 });
  const servers: Running[] = [];
  try {
    for (const steps of STEPS) servers.push(await startFloor(stub.ports, steps));
    servers.push(
      await startKvroute(stub.ports, { upstream: 'h1' }, 'kvroute-h1'),
      await startKvroute(stub.ports, { upstream: 'undici' }, 'kvroute-undici'),
    );
    const cpu = new Map<Running, number[]>(servers.map((s) => [s, []]));
    const load = (s: Running, secs: number) =>
      closedLoop({ port: s.port, path: '/v1/chat/completions', requests }, { connections: 64, seconds: secs });
    for (const s of servers) await load(s, 1); // warm-up
    console.log(
      `  64 connections, non-streaming, ${values['prompt-only'] ? 'no hash_ids (prompts hashed)' : 'hash_ids'}, ${seconds} s x ${reps} per server, alternated`,
    );
    for (let rep = 0; rep < reps; rep++)
      for (const s of servers) {
        const before = cpuSeconds(s.workerPid);
        const run = await load(s, seconds);
        if (run.errors > 0) throw new Error(`${s.name}: ${run.errors} errors`);
        cpu.get(s)!.push(((cpuSeconds(s.workerPid) - before) * 1e6) / Math.max(1, run.ok));
      }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    let previous: number | undefined;
    for (const s of servers) {
      const m = median(cpu.get(s)!);
      const step = s.name.startsWith('floor') && previous !== undefined ? `  (+${(m - previous).toFixed(1)})` : '';
      if (s.name.startsWith('floor')) previous = m;
      console.log(
        `    ${s.name.padEnd(28)} ${m.toFixed(1).padStart(6)} µs CPU/req${step.padEnd(10)}  runs ${cpu
          .get(s)!
          .map((c) => c.toFixed(0))
          .join(' ')}`,
      );
    }
  } finally {
    for (const s of [...servers].reverse()) {
      const problem = await s.stop();
      if (problem) console.log(`  WARNING: ${problem}`);
    }
    await stub.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
