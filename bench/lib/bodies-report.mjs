// @ts-check
// Issue #13's request-body workloads: proxy-body-size (one body's event-loop cost, by size) and
// proxy-bodies (what 5 x 50 MB bodies cost every other client of a live proxy): their target
// checks and their section of bench/RESULTS.md.

/**
 * One body size: event-loop µs of parse + route through the JavaScript path, the synchronous
 * scanner, the threadpool scanner, and the path the proxy takes for that size.
 * @typedef {{ workload: 'proxy-body-size', kind: 'proxy-body-size', kib: number, js_us: number,
 *   sync_us: number, async_us: number, proxy_us: number, date?: string }} BodySizeResult
 * @typedef {import('../proxy-bodies.ts').BodiesResult} BodiesResult
 */

/** @param {readonly object[]} results */
const bodySizes = (results) =>
  /** @type {BodySizeResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'proxy-body-size'));
/** @param {readonly object[]} results */
const bursts = (results) =>
  /** @type {BodiesResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'proxy-bodies'));

const TARGET_KIB = 820;
const ms = (/** @type {number} */ us) => `${(us / 1000).toFixed(us < 10_000 ? 3 : 1)} ms`;

/** @param {readonly object[]} allResults */
export function bodiesTargetChecks(allResults) {
  const lines = [];
  const mark = (/** @type {boolean} */ ok) => (ok ? 'MET ' : 'MISS');
  const size = bodySizes(allResults).find((r) => Math.abs(r.kib - TARGET_KIB) < 40);
  if (size)
    lines.push(
      `  ${mark(size.proxy_us <= 500)}  an ${size.kib.toFixed(0)} KiB body costs the proxy's event loop <= 0.5 ms: ${ms(size.proxy_us)}` +
        ` (JSON.parse path ${ms(size.js_us)}, synchronous scan ${ms(size.sync_us)})`,
    );
  for (const b of bursts(allResults)) {
    lines.push(
      `  ${mark(b.health_p99_us <= 20_000)}  /health p99 <= 20 ms while ${b.bodies} x ${b.body_mb} MB bodies arrive: ${ms(b.health_p99_us)}` +
        ` (max ${ms(b.health_max_us)}; idle p99 ${ms(b.idle_health_p99_us)})`,
    );
    lines.push(
      `  info  big bodies: ${b.errors} of ${b.bodies * b.bursts} failed; proxy RSS ${b.rss_before_mb.toFixed(0)} MiB before, ` +
        `${b.rss_peak_mb.toFixed(0)} MiB at peak, ${b.rss_after_mb.toFixed(0)} MiB after`,
    );
  }
  return lines;
}

/** @param {readonly object[]} allResults */
export function renderBodiesResults(allResults) {
  const out = [];
  const sizes = bodySizes(allResults);
  if (sizes.length > 0) {
    out.push('## proxy-body-size: what one request body costs the event loop (issue #13)', '');
    out.push(
      'In-process on dist/: a chat body of one long user message (no `hash_ids`), parsed and its prompt hashed, then routed (unified, 4 instances); the median of the timed repetitions. `JSON.parse` path: `parseRequest()` + the router hashing the prompt; sync: the native scanner on the loop; async: the scanner on the threadpool, counting the loop’s active time while it runs (`performance.eventLoopUtilization`). The proxy scans up to 64 KiB synchronously, larger bodies asynchronously: `proxy` is the path it takes. [bench/proxy-body-size.mjs](proxy-body-size.mjs).',
      '',
    );
    out.push('| body | JSON.parse path | sync scan | async scan | proxy | date |', '|---:|---:|---:|---:|---:|---|');
    for (const r of sizes)
      out.push(
        `| ${r.kib < 1024 ? `${r.kib.toFixed(0)} KiB` : `${(r.kib / 1024).toFixed(1)} MiB`} | ${ms(r.js_us)} | ${ms(r.sync_us)} | ${ms(r.async_us)} | ${ms(r.proxy_us)} | ${r.date ?? ''} |`,
      );
    out.push('');
  }
  const bs = bursts(allResults);
  if (bs.length > 0) {
    out.push('## proxy-bodies: huge bodies through kvroute serve, and what they cost other clients (issue #13)', '');
    out.push(
      '`kvroute serve` (as it ships) in front of the uWS stub; a probe sends `GET /health` back to back over its own connection while bursts of concurrent 50 MB chat bodies (no `hash_ids`) arrive. RSS is the proxy’s VmRSS: before, at the peak, and the lowest in the seconds after the last burst. [bench/proxy-bodies.ts](proxy-bodies.ts).',
      '',
    );
    out.push(
      '| bodies | /health idle p99 | /health p50 during | p99 during | max during | failed | RSS before | RSS peak | RSS after | date |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|---|',
    );
    for (const b of bs)
      out.push(
        `| ${b.bursts} × ${b.bodies} × ${b.body_mb} MB | ${ms(b.idle_health_p99_us)} | ${ms(b.health_p50_us)} | ${ms(b.health_p99_us)} | ${ms(b.health_max_us)} | ${b.errors} | ${b.rss_before_mb.toFixed(0)} MiB | ${b.rss_peak_mb.toFixed(0)} MiB | ${b.rss_after_mb.toFixed(0)} MiB | ${b.date ?? ''} |`,
      );
    out.push('');
  }
  return out;
}
