// @ts-check
// The proxy workload's (issues #6, #13) target checks and its section of bench/RESULTS.md.

/**
 * One leg of one scenario. `rps` is req/s (streams: completed streams/s); latencies are µs,
 * request written → response parsed (streams: → [DONE]); `cpu_us_per_req` is the server
 * process's user+system CPU per request (nginx: its worker; direct: the stub); `others_cpu_pct` the
 * share of the machine's CPU that processes outside the bench used during the run. `floor` is
 * bench/proxy-floor.mjs, the bare uWebSockets.js + node:net relay (the architecture's lower bound);
 * `floor-steps` the same relay doing what no cache-aware router can skip (headers, parse, route).
 * `kvroute` is kvroute serve as it ships; `kvroute-h1`/`kvroute-undici` with the other upstream
 * client; `kvroute-node` on Node's http server (`--http node`).
 * @typedef {{
 *   workload: 'proxy', kind: 'proxy',
 *   scenario: 'latency' | 'rps' | 'stream-rps' | 'streams',
 *   target: 'direct' | 'nginx' | 'floor' | 'floor-steps' | 'kvroute' | 'kvroute-h1' | 'kvroute-undici' | 'kvroute-node',
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
 * MET/MISS lines for issue #13's proxy targets, checked on `kvroute` (as it ships) and, for the
 * 1,000 streams, on both server modes; a SKIP line for a leg that did not run; `info` lines (no
 * target) for the nginx ratios, the floor and the other legs.
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
      `  ${mark(added <= 150)}  proxy adds <= 150 µs at p50 (1 connection, non-streaming): ${f(added)} µs` +
        (nginxLatency ? ` (nginx adds ${f(nginxLatency.p50_us - direct.p50_us)} µs)` : ''),
    );
  }
  const steps = find(rs, 'rps', 'floor-steps');
  const kvRps = find(rs, 'rps', 'kvroute');
  if (steps && kvRps) {
    const own = kvRps.cpu_us_per_req - steps.cpu_us_per_req;
    lines.push(
      `  ${mark(own <= 20)}  kvroute's own CPU above the floor with steps <= 20 µs/req (64 connections, non-streaming): ${own < 0 ? '−' : '+'}${f(Math.abs(own))} µs` +
        ` (${f(kvRps.cpu_us_per_req)} vs ${f(steps.cpu_us_per_req)})`,
    );
  }
  for (const target of /** @type {const} */ (['kvroute', 'kvroute-node'])) {
    const streams = find(rs, 'streams', target);
    if (!streams) continue;
    const failed = streams.errors + (streams.incomplete ?? 0);
    lines.push(
      `  ${mark(failed === 0)}  zero errors at 1,000 concurrent streams through ${target}: ${streams.errors} errors, ${streams.incomplete ?? 0} incomplete of ${(streams.requests + failed).toLocaleString('en-US')}`,
    );
  }
  lines.push(...nginxInfo(rs), ...floorInfo(rs), ...otherLegsInfo(rs));
  return lines;
}

const SCENARIO = { rps: 'non-streaming', 'stream-rps': 'streaming' };
const KVROUTE_TARGETS = /** @type {const} */ (['kvroute', 'kvroute-h1', 'kvroute-undici', 'kvroute-node']);

/** kvroute's req/s against nginx's (no target since issue #13). @param {ProxyResult[]} rs */
function nginxInfo(rs) {
  const parts = [];
  for (const scenario of /** @type {const} */ (['rps', 'stream-rps'])) {
    const kv = find(rs, scenario, 'kvroute');
    const nginx = find(rs, scenario, 'nginx');
    if (kv && nginx) parts.push(`${(kv.rps / nginx.rps).toFixed(2)}x ${SCENARIO[scenario]}`);
  }
  return parts.length > 0 ? [`  info  kvroute/nginx req/s (64 connections): ${parts.join(', ')}`] : [];
}

/**
 * Informational lines, no target: the floor's req/s against nginx's, and each kvroute leg's server
 * CPU per request above the floor's and the floor-with-steps'.
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
    const steps = find(rs, scenario, 'floor-steps');
    if (!floor) continue;
    const nginx = find(rs, scenario, 'nginx');
    if (nginx) ratios.push(`${(floor.rps / nginx.rps).toFixed(2)}x ${SCENARIO[scenario]}`);
    if (steps) above.push(`floor-steps +${f(steps.cpu_us_per_req - floor.cpu_us_per_req)} µs (${SCENARIO[scenario]})`);
    for (const target of KVROUTE_TARGETS) {
      const kv = find(rs, scenario, target);
      if (!kv) continue;
      const d = kv.cpu_us_per_req - floor.cpu_us_per_req;
      const s = steps ? kv.cpu_us_per_req - steps.cpu_us_per_req : undefined;
      above.push(
        `${target} ${d < 0 ? '−' : '+'}${f(Math.abs(d))} µs` +
          (s === undefined ? '' : ` (${s < 0 ? '−' : '+'}${f(Math.abs(s))} over steps)`) +
          ` (${SCENARIO[scenario]})`,
      );
    }
  }
  if (ratios.length > 0)
    lines.push(`  info  proxy floor (bare uWS + node:net relay) req/s vs nginx (64 connections): ${ratios.join(', ')}`);
  if (above.length > 0) lines.push(`  info  server CPU per request above the floor: ${above.join(', ')}`);
  return lines;
}

/**
 * The other kvroute legs (the other upstream client, the node server) against the same targets,
 * as information. @param {ProxyResult[]} rs
 */
function otherLegsInfo(rs) {
  const lines = [];
  const direct = find(rs, 'latency', 'direct');
  for (const target of KVROUTE_TARGETS.slice(1)) {
    const parts = [];
    const latency = find(rs, 'latency', target);
    if (direct && latency) parts.push(`adds ${f(latency.p50_us - direct.p50_us)} µs at p50 (1 connection)`);
    for (const scenario of /** @type {const} */ (['rps', 'stream-rps'])) {
      const kv = find(rs, scenario, target);
      const nginx = find(rs, scenario, 'nginx');
      if (kv && nginx) parts.push(`${(kv.rps / nginx.rps).toFixed(2)}x nginx req/s ${SCENARIO[scenario]}`);
    }
    const streams = find(rs, 'streams', target);
    if (streams && target !== 'kvroute-node')
      parts.push(`${streams.errors} errors, ${streams.incomplete ?? 0} incomplete at 1,000 concurrent streams`);
    if (parts.length > 0) lines.push(`  info  ${target}: ${parts.join('; ')}`);
  }
  return lines;
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
  const out = ['## proxy: kvroute serve vs nginx vs a bare relay vs straight to a stub backend (issues #6, #13)', ''];
  out.push(
    'All on loopback on the machine above, legs interleaved. Added latency = the leg’s p50 (p99) minus direct’s, at 1 connection (no queueing). nginx: Debian’s, `worker_processes 1`, upstream keepalive, `proxy_buffering off`. floor: [bench/proxy-floor.mjs](proxy-floor.mjs), the bare uWebSockets.js + node:net relay any such Node proxy pays before any work of its own (no JSON parsing, routing, metrics, header forwarding, timeouts or retries): kvroute − floor is kvroute’s own code, floor − nginx the architecture. floor-steps: the floor doing what no cache-aware router can skip (forward the headers, JSON.parse the body and its `hash_ids`, route and complete with the native Router): kvroute − floor-steps is kvroute’s own machinery. kvroute: `kvroute serve` as it ships; kvroute-h1 / kvroute-undici: with the other upstream client; kvroute-node: `--http node`. Server CPU is the server process’s user+system time per request (nginx: its worker); others’ CPU is the share of the machine’s CPU that processes outside the bench (other sessions’ builds and tests) used during the run. 2 shared cores: the stub, the proxy and the load generator compete for them. Method: [bench/README.md](README.md#proxy-issue-6).',
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
