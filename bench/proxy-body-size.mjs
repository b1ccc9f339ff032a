// @ts-check
/**
 * What one request body costs the proxy's event loop before anything is sent upstream, by body
 * size, for the three ways to read it, in-process on dist/, no I/O:
 *
 *   js      parseRequest() (JSON.parse and the routing inputs), then the router call, which
 *           hashes the prompt into block ids and decides: today's proxy path;
 *   sync    scanRequest(): the native scanner (simdjson, the prompt hashed in C++) on the event
 *           loop, then the router call with the ids;
 *   async   scanRequestAsync(): the same scan on the libuv threadpool. Its loop time is the
 *           synchronous time of the call (`call`) plus the main-thread work of settling it (the
 *           addon's completion callback and the promise's continuation): `loop` is the event
 *           loop's active time per scan (performance.eventLoopUtilization), then the router call.
 *           On a 2-core machine a threadpool scan of tens of MB can also keep the loop's thread
 *           off the CPU for a few ms (the scheduler), which `loop` counts and `call` mostly not.
 *
 * Loop time is the synchronous time of the calls on the main thread: time every other open stream
 * waits. Agentic prompts run to hundreds of KiB. The target: an 820 KiB body costs ≤ 0.5 ms.
 *
 *   node bench/proxy-body-size.mjs [--sizes 2,50,200,800,8192,51200] [--quick] [--out FILE]
 *   (needs `npm run build`; or: npm run bench -- --only proxy-body-size)
 *
 * The proxy scans bodies up to SYNC_SCAN_MAX_BYTES synchronously and larger ones on the
 * threadpool; `proxy` in the results is the path it takes for that size. Chat requests
 * without `hash_ids`, one long user message of code-like lines (escaped newlines, as agents send),
 * 16 sessions, policy unified over 4 instances; the median of the timed repetitions after a
 * warm-up quarter.
 */
import { Router } from '../dist/index.js';
import { scanKernel } from '../dist/core/request-scanner.js';
import { parseRequest } from '../dist/proxy/exchange/request-inputs.js';
import { scanRequest, scanRequestAsync, SYNC_SCAN_MAX_BYTES } from '../dist/proxy/exchange/request-scan.js';
import { writeFileSync } from 'node:fs';

import { agenticChatBody } from './lib/agentic-body.mjs';
import { machineInfo, printMachine } from './lib/machine.mjs';

const outArg = process.argv.indexOf('--out');
const OUT = outArg > 0 ? process.argv[outArg + 1] : undefined;
const QUICK = process.argv.includes('--quick');
const sizesArg = process.argv.indexOf('--sizes');
const SIZES_KB =
  sizesArg > 0
    ? String(process.argv[sizesArg + 1])
        .split(',')
        .map(Number)
    : QUICK
      ? [2, 50, 200, 800, 8192]
      : [2, 50, 200, 800, 8192, 51200];
const TARGET_KIB = 820;
const TARGET_MS = 0.5;

/** @param {number[]} xs */
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;

/** @param {number} kb */
const body = (kb) => agenticChatBody(kb * 1024, { stream: true });

if (OUT === undefined) printMachine(machineInfo());
console.log(
  `  simdjson kernel: ${scanKernel()}; the proxy scans up to ${SYNC_SCAN_MAX_BYTES / 1024} KiB on the loop, larger bodies on the threadpool`,
);
const router = new Router({ instances: ['a', 'b', 'c', 'd'], policy: 'unified' });
const ratio = (/** @type {number} */ x) => `${x < 10 ? x.toFixed(1) : x.toFixed(0)}x`;
const f = (/** @type {number} */ us) =>
  (us >= 10_000 ? `${(us / 1000).toFixed(0)} ms` : `${us.toFixed(0)} µs`).padStart(7);
/** @type {{ kib: number, js: number, sync: number, async: number, proxy: number }[]} */
const rows = [];

for (const kb of SIZES_KB) {
  const bytes = body(kb);
  const reps = kb > 4096 ? 8 : Math.max(20, Math.floor(4000 / kb));
  const warm = Math.floor(reps / 4);
  /** @type {{ jsParse: number[], jsRoute: number[], syncScan: number[], syncRoute: number[], asyncCall: number[], asyncRoute: number[] }} */
  const t = { jsParse: [], jsRoute: [], syncScan: [], syncRoute: [], asyncCall: [], asyncRoute: [] };
  for (let i = 0; i < reps; i++) {
    const session = `session-${i % 16}`;
    const t0 = performance.now();
    const parsed = parseRequest('chat', bytes, session, false);
    const t1 = performance.now();
    router.complete(router.route(parsed.route));
    const t2 = performance.now();
    const scanned = scanRequest('chat', bytes, session, false);
    const t3 = performance.now();
    router.complete(router.route(scanned.route));
    const t4 = performance.now();
    if (i < warm) continue;
    t.jsParse.push((t1 - t0) * 1000);
    t.jsRoute.push((t2 - t1) * 1000);
    t.syncScan.push((t3 - t2) * 1000);
    t.syncRoute.push((t4 - t3) * 1000);
  }
  // Async: sequential scans, the main thread's share of each measured by event-loop utilization.
  /** @type {number[]} */
  const active = [];
  for (let i = 0; i < reps; i++) {
    const elu0 = performance.eventLoopUtilization();
    const c0 = performance.now();
    const pending = scanRequestAsync('chat', bytes, `session-${i % 16}`, false);
    const c1 = performance.now();
    const scanned = await pending;
    const elu = performance.eventLoopUtilization(elu0);
    const r0 = performance.now();
    router.complete(router.route(scanned.route));
    const r1 = performance.now();
    if (i < warm) continue;
    t.asyncCall.push((c1 - c0) * 1000);
    t.asyncRoute.push((r1 - r0) * 1000);
    active.push(elu.active * 1000);
  }
  const m = Object.fromEntries(Object.entries(t).map(([k, v]) => [k, median(v)]));
  const asyncLoop = median(active);
  const js = (m.jsParse ?? 0) + (m.jsRoute ?? 0);
  const sync = (m.syncScan ?? 0) + (m.syncRoute ?? 0);
  const asyncTotal = asyncLoop + (m.asyncRoute ?? 0);
  rows.push({
    kib: bytes.length / 1024,
    js,
    sync,
    async: asyncTotal,
    proxy: bytes.length <= SYNC_SCAN_MAX_BYTES ? sync : asyncTotal,
  });
  console.log(
    `  ${(bytes.length / 1024).toFixed(0).padStart(6)} KiB  ` +
      `js: parse ${f(m.jsParse ?? 0)} + route ${f(m.jsRoute ?? 0)} = ${f(js)}   ` +
      `sync: scan ${f(m.syncScan ?? 0)} + route ${f(m.syncRoute ?? 0)} = ${f(sync)} (${ratio(js / sync)})   ` +
      `async: call ${f(m.asyncCall ?? 0)}, loop ${f(asyncLoop)} + route ${f(m.asyncRoute ?? 0)} = ${f(asyncTotal)} (${ratio(js / asyncTotal)})`,
  );
}

if (OUT !== undefined)
  writeFileSync(
    OUT,
    JSON.stringify(
      rows.map((r) => ({
        workload: 'proxy-body-size',
        kind: 'proxy-body-size',
        kib: r.kib,
        js_us: r.js,
        sync_us: r.sync,
        async_us: r.async,
        proxy_us: r.proxy,
      })),
    ),
  );
const target = rows.find((r) => Math.abs(r.kib - TARGET_KIB) < 40);
if (target !== undefined) {
  const verdict = (/** @type {number} */ us) => (us / 1000 <= TARGET_MS ? 'holds' : 'MISSED');
  console.log(
    `target: a ${target.kib.toFixed(0)} KiB body costs the loop ≤ ${TARGET_MS} ms: ` +
      `sync ${(target.sync / 1000).toFixed(3)} ms (${verdict(target.sync)}), ` +
      `async ${(target.async / 1000).toFixed(3)} ms (${verdict(target.async)}); js ${(target.js / 1000).toFixed(2)} ms`,
  );
}
