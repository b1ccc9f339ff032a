// @ts-check
// The proxy workload's (issue #6) target checks and its section of bench/RESULTS.md.

/**
 * One leg of one scenario. `rps` is req/s (streams: completed streams/s); latencies are µs,
 * request written → response parsed (streams: → [DONE]); `cpu_us_per_req` is the server
 * process's user+system CPU per request (nginx: its worker; direct: the stub); `others_cpu_pct` the
 * share of the machine's CPU that processes outside the bench used during the run. `floor` is
 * bench/proxy-floor.mjs, the bare uWebSockets.js + node:net relay (the architecture's lower bound).
 * @typedef {{
 *   workload: 'proxy', kind: 'proxy',
 *   scenario: 'latency' | 'rps' | 'stream-rps' | 'streams',
 *   target: 'direct' | 'nginx' | 'floor' | 'kvroute' | 'kvroute-h1',
 *   connections: number, streaming: boolean,
 *   requests: number, errors: number, incomplete?: number,
 *   rps: number, p50_us: number, p99_us: number,
 *   ttfb_p50_us?: number, ttfb_p99_us?: number,
 *   cpu_us_per_req: number, others_cpu_pct: number, date?: string,
 * }} ProxyResult
 */

/** @param {readonly object[]} results @returns {ProxyResult[]} */
export const proxyOnly = (results) =>
  /** @type {ProxyResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'proxy'));

/** @param {ProxyResult[]} rs @param {ProxyResult['scenario']} scenario @param {ProxyResult['target']} target */
const find = (rs, scenario, target) => rs.find((r) => r.scenario === scenario && r.target === target);

/** @param {number} x */
const f = (x) => (x < 10 ? x.toFixed(2) : x < 100 ? x.toFixed(1) : x.toFixed(0));

/**
 * MET/MISS lines for issue #6's targets; a SKIP line for a leg that did not run; `info` lines (no
 * target) comparing the floor leg with nginx and kvroute, where it ran.
 * @param {readonly object[]} allResults
 */
export function proxyTargetChecks(allResults) {
  const rs = proxyOnly(allResults);
  if (rs.length === 0) return [];
  /** @type {string[]} */
  const lines = [];
  const mark = (/** @type {boolean} */ ok) => (ok ? 'MET ' : 'MISS');
  const direct = find(rs, 'latency', 'direct');
  const nginxLatency = find(rs, 'latency', 'nginx');
  const kvLatency = find(rs, 'latency', 'kvroute');
  if (!kvLatency) lines.push('  SKIP  proxy: no kvroute leg (dist/cli.js had no `serve` verb)');
  if (!find(rs, 'latency', 'nginx')) lines.push('  SKIP  proxy: no nginx leg (nginx not installed)');
  if (direct && kvLatency) {
    const added = kvLatency.p50_us - direct.p50_us;
    lines.push(
      `  ${mark(added <= 100)}  proxy adds <= 100 µs at p50 (1 connection, non-streaming): ${f(added)} µs` +
        (nginxLatency ? ` (nginx adds ${f(nginxLatency.p50_us - direct.p50_us)} µs)` : ''),
    );
  }
  for (const scenario of /** @type {const} */ (['rps', 'stream-rps'])) {
    const kv = find(rs, scenario, 'kvroute');
    const nginx = find(rs, scenario, 'nginx');
    if (!kv || !nginx) continue;
    const ratio = kv.rps / nginx.rps;
    lines.push(
      `  ${mark(ratio >= 1)}  kvroute/nginx req/s >= 1.0 (64 connections, ${scenario === 'rps' ? 'non-streaming' : 'streaming'}): ${ratio.toFixed(2)}x` +
        ` (${Math.round(kv.rps).toLocaleString('en-US')} vs ${Math.round(nginx.rps).toLocaleString('en-US')})`,
    );
  }
  const streams = find(rs, 'streams', 'kvroute');
  if (streams) {
    const failed = streams.errors + (streams.incomplete ?? 0);
    lines.push(
      `  ${mark(failed === 0)}  zero errors at 1,000 concurrent streams through kvroute: ${streams.errors} errors, ${streams.incomplete ?? 0} incomplete of ${(streams.requests + failed).toLocaleString('en-US')}`,
    );
  }
  lines.push(...floorInfo(rs));
  return lines;
}

const SCENARIO = { rps: 'non-streaming', 'stream-rps': 'streaming' };

/**
 * Informational lines, no target: the floor's req/s against nginx's, and kvroute's server CPU
 * per request above the floor's (what kvroute's own code costs on top of the bare relay).
 * @param {ProxyResult[]} rs
 */
function floorInfo(rs) {
  /** @type {string[]} */
  const lines = [];
  /** @type {string[]} */
  const ratios = [];
  /** @type {string[]} */
  const above = [];
  for (const scenario of /** @type {const} */ (['rps', 'stream-rps'])) {
    const floor = find(rs, scenario, 'floor');
    if (!floor) continue;
    const nginx = find(rs, scenario, 'nginx');
    if (nginx) ratios.push(`${(floor.rps / nginx.rps).toFixed(2)}x ${SCENARIO[scenario]}`);
    for (const target of /** @type {const} */ (['kvroute', 'kvroute-h1'])) {
      const kv = find(rs, scenario, target);
      if (!kv) continue;
      const d = kv.cpu_us_per_req - floor.cpu_us_per_req;
      above.push(`${target} ${d < 0 ? '−' : '+'}${f(Math.abs(d))} µs/req (${SCENARIO[scenario]})`);
    }
  }
  if (ratios.length > 0)
    lines.push(`  info  proxy floor (bare uWS + node:net relay) req/s vs nginx (64 connections): ${ratios.join(', ')}`);
  if (above.length > 0) lines.push(`  info  kvroute's own server CPU above the floor: ${above.join(', ')}`);
  lines.push(...h1Info(rs));
  return lines;
}

/**
 * The `--upstream h1` leg measured against the same targets, as information: the targets are
 * checked on the default (undici) leg.
 * @param {ProxyResult[]} rs
 */
function h1Info(rs) {
  const parts = [];
  const direct = find(rs, 'latency', 'direct');
  const latency = find(rs, 'latency', 'kvroute-h1');
  if (direct && latency) parts.push(`adds ${f(latency.p50_us - direct.p50_us)} µs at p50 (1 connection)`);
  for (const scenario of /** @type {const} */ (['rps', 'stream-rps'])) {
    const kv = find(rs, scenario, 'kvroute-h1');
    const nginx = find(rs, scenario, 'nginx');
    if (kv && nginx) parts.push(`${(kv.rps / nginx.rps).toFixed(2)}x nginx req/s ${SCENARIO[scenario]}`);
  }
  const streams = find(rs, 'streams', 'kvroute-h1');
  if (streams)
    parts.push(`${streams.errors} errors, ${streams.incomplete ?? 0} incomplete at 1,000 concurrent streams`);
  return parts.length > 0 ? [`  info  kvroute --upstream h1: ${parts.join('; ')}`] : [];
}

/** µs below 1 ms, else ms; signed when `sign`. @param {number} us @param {boolean} [sign] */
const time = (us, sign = false) => {
  const prefix = sign ? (us < 0 ? '−' : '+') : '';
  const a = Math.abs(us);
  return `${prefix}${a < 1000 ? `${f(a)} µs` : `${f(a / 1000)} ms`}`;
};

/**
 * The RESULTS.md section, or nothing without proxy results.
 * @param {readonly object[]} allResults
 */
export function renderProxyResults(allResults) {
  const rs = proxyOnly(allResults);
  if (rs.length === 0) return [];
  const out = ['## proxy: kvroute serve vs nginx vs a bare relay vs straight to a stub backend (issue #6)', ''];
  out.push(
    'All on loopback on the machine above, legs interleaved. Added latency = the leg’s p50 (p99) minus direct’s, at 1 connection (no queueing). nginx: Debian’s, `worker_processes 1`, upstream keepalive, `proxy_buffering off`. floor: [bench/proxy-floor.mjs](proxy-floor.mjs), the bare uWebSockets.js + node:net relay any such Node proxy pays before any work of its own (no JSON parsing, routing, metrics, header forwarding, timeouts or retries): kvroute − floor is kvroute’s own code, floor − nginx the architecture. Server CPU is the server process’s user+system time per request (nginx: its worker); others’ CPU is the share of the machine’s CPU that processes outside the bench (other sessions’ builds and tests) used during the run. 2 shared cores: the stub, the proxy and the load generator compete for them. Method: [bench/README.md](README.md#proxy-issue-6).',
    '',
  );
  if (!rs.some((r) => r.target === 'kvroute'))
    out.push('**kvroute leg not measured**: `kvroute serve` did not exist when these were recorded.', '');
  out.push(
    '| scenario | leg | req/s | p50 | p99 | added p50 | added p99 | errors | server CPU µs/req | others’ CPU | date |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  );
  const label = {
    latency: 'latency, 1 conn',
    rps: '64 conn, non-streaming',
    'stream-rps': '64 conn, streaming',
    streams: '1,000 streams, streams/s, time to [DONE]',
  };
  for (const r of rs) {
    const direct = find(rs, r.scenario, 'direct');
    const added = (/** @type {number} */ a, /** @type {number} */ b) =>
      direct && r.target !== 'direct' ? time(a - b, true) : '–';
    const errors = r.incomplete === undefined ? `${r.errors}` : `${r.errors} + ${r.incomplete} incomplete`;
    out.push(
      `| ${label[r.scenario]} | ${r.target} | ${Math.round(r.rps).toLocaleString('en-US')} | ${time(r.p50_us)} | ${time(r.p99_us)} | ` +
        `${added(r.p50_us, direct?.p50_us ?? 0)} | ${added(r.p99_us, direct?.p99_us ?? 0)} | ${errors} | ${f(r.cpu_us_per_req)} | ${r.others_cpu_pct.toFixed(0)}% | ${r.date ?? ''} |`,
    );
  }
  out.push('');
  return out;
}
