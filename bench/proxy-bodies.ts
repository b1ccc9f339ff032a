/**
 * Workload (issue #13): huge request bodies through `kvroute serve`, and what they cost every
 * other client. Agentic prompts are large; a proxy that parses them on its event loop delays
 * every open stream while it does.
 *
 * The stub backend (bench/proxy-stub.ts) and `kvroute serve` (as it ships) run as children. A
 * probe sends `GET /health` to the proxy back to back over its own keep-alive connection and
 * keeps every latency. Then, in each of BURSTS rounds, BODIES clients post a chat request of
 * BODY_MB MB at once (one long user message of code-like lines, no `hash_ids`: the proxy parses
 * the body and hashes the prompt), each read to its end. Reported:
 * - /health p50/p99/max while the bodies arrive (from the first upload's start to the last
 *   response), against the same probe with no bodies (idle). Target: p99 <= 20 ms.
 * - the proxy's resident memory (VmRSS) before, at its peak, and after the last round has settled
 *   (the minimum over the settle window), so a burst that is never given back shows.
 * - how many body requests failed (any non-2xx counts).
 *
 *   node --import tsx bench/proxy-bodies.ts [--quick] [--out FILE]   (or: npm run bench -- --only proxy-bodies)
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

import { Client, Pool } from 'undici';

import { agenticChatBody } from './lib/agentic-body.mjs';
import { machineInfo, printMachine } from './lib/machine.mjs';
import { kvrouteServeAvailable, rssBytes, startKvroute, startStub } from './lib/proxy-procs.js';

const { values } = parseArgs({ options: { quick: { type: 'boolean' }, out: { type: 'string' } } });
const quick = values.quick === true;
const BODIES = 5;
const BODY_MB = 50;
const BURSTS = quick ? 1 : 3;
const IDLE_MS = 2_000;
/** After the last burst: how long RSS is watched for memory to be given back. */
const SETTLE_MS = quick ? 3_000 : 10_000;
/** Bounds on the probe: it stops at the first of these. */
const PROBE_MAX = 2_000_000;

export interface BodiesResult {
  workload: 'proxy-bodies';
  kind: 'proxy-bodies';
  bodies: number;
  body_mb: number;
  bursts: number;
  idle_health_p50_us: number;
  idle_health_p99_us: number;
  health_samples: number;
  health_p50_us: number;
  health_p99_us: number;
  health_max_us: number;
  errors: number;
  rss_before_mb: number;
  rss_peak_mb: number;
  rss_after_mb: number;
  date?: string;
}

const quantile = (sorted: Float64Array, q: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

/** GET /health back to back until stop() (or PROBE_MAX requests); every latency in µs. */
function startProbe(port: number): { stop(): Promise<Float64Array>; mark(): number } {
  const client = new Client(`http://127.0.0.1:${port}`, { pipelining: 1 });
  const latencies: number[] = [];
  let running = true;
  const done = (async () => {
    while (running && latencies.length < PROBE_MAX) {
      const t0 = performance.now();
      const { body } = await client.request({ path: '/health', method: 'GET' });
      await body.dump();
      latencies.push((performance.now() - t0) * 1000);
    }
  })();
  return {
    mark: () => latencies.length,
    async stop() {
      running = false;
      await done;
      await client.close();
      return Float64Array.from(latencies);
    },
  };
}

async function main(): Promise<BodiesResult> {
  if (!values.out) printMachine(machineInfo());
  if (!kvrouteServeAvailable()) throw new Error('dist/cli.js has no `serve` verb: npm run build');
  console.log(
    `  ${BURSTS} bursts of ${BODIES} concurrent ${BODY_MB} MB chat bodies (no hash_ids) through kvroute serve; /health probed back to back`,
  );
  const body = agenticChatBody(BODY_MB * 1e6, { model: 'stub', max_tokens: 16 });
  const stub = await startStub({ ports: 1, chunks: 4, chunkDelayMs: 0 });
  const proxy = await startKvroute(stub.ports, {});
  const pool = new Pool(`http://127.0.0.1:${proxy.port}`, { connections: BODIES, pipelining: 1 });
  let peak = 0;
  const rssTimer = setInterval(() => (peak = Math.max(peak, rssBytes(proxy.workerPid))), 20);
  try {
    const before = rssBytes(proxy.workerPid);
    const probe = startProbe(proxy.port);
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const idleEnd = probe.mark();
    const windows: Array<[number, number]> = [];
    let errors = 0;
    for (let burst = 0; burst < BURSTS; burst++) {
      const start = probe.mark();
      const statuses = await Promise.all(
        Array.from({ length: BODIES }, async () => {
          const response = await pool.request({
            path: '/v1/chat/completions',
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body,
          });
          await response.body.dump();
          return response.statusCode;
        }),
      );
      windows.push([start, probe.mark()]);
      errors += statuses.filter((s) => s < 200 || s >= 300).length;
    }
    // Memory given back: the lowest RSS over the settle window, while the probe keeps running.
    let after = Infinity;
    const settleEnd = Date.now() + SETTLE_MS;
    while (Date.now() < settleEnd) {
      after = Math.min(after, rssBytes(proxy.workerPid));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const all = await probe.stop();
    const idle = all.slice(0, idleEnd).sort();
    const during = Float64Array.from(windows.flatMap(([a, b]) => [...all.slice(a, b)])).sort();
    const mb = (bytes: number) => bytes / 2 ** 20;
    const result: BodiesResult = {
      workload: 'proxy-bodies',
      kind: 'proxy-bodies',
      bodies: BODIES,
      body_mb: BODY_MB,
      bursts: BURSTS,
      idle_health_p50_us: quantile(idle, 0.5),
      idle_health_p99_us: quantile(idle, 0.99),
      health_samples: during.length,
      health_p50_us: quantile(during, 0.5),
      health_p99_us: quantile(during, 0.99),
      health_max_us: during[during.length - 1]!,
      errors,
      rss_before_mb: mb(before),
      rss_peak_mb: mb(peak),
      rss_after_mb: mb(after),
    };
    const ms = (us: number) => `${(us / 1000).toFixed(2)} ms`;
    console.log(
      `    /health idle: p50 ${ms(result.idle_health_p50_us)} p99 ${ms(result.idle_health_p99_us)}; ` +
        `while bodies arrive (${during.length} probes): p50 ${ms(result.health_p50_us)} p99 ${ms(result.health_p99_us)} max ${ms(result.health_max_us)}`,
    );
    console.log(
      `    body requests failed: ${errors} of ${BURSTS * BODIES}; proxy RSS before ${result.rss_before_mb.toFixed(0)} MiB, ` +
        `peak ${result.rss_peak_mb.toFixed(0)} MiB, after ${result.rss_after_mb.toFixed(0)} MiB`,
    );
    return result;
  } finally {
    clearInterval(rssTimer);
    await pool.close();
    for (const p of [proxy, stub]) {
      const problem = await p.stop();
      if (problem) console.log(`  WARNING: ${problem}`);
    }
  }
}

main().then(
  (result) => {
    if (values.out) writeFileSync(values.out, JSON.stringify([result]));
  },
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
