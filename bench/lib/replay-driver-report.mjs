// @ts-check
// Issue #15's replay-driver workload: its target checks and its section of bench/RESULTS.md.

/** @typedef {import('../replay-driver.js').ReplayDriverResult & { date?: string }} ReplayDriverResult */

/** Targets: the driver sends at least this many requests/s, at most this much CPU per request. */
const TARGET_RPS = 5_000;
const TARGET_CPU_US = 100;

/** @param {readonly object[]} results */
const drivers = (results) =>
  /** @type {ReplayDriverResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'replay-driver'));

/** @param {readonly object[]} allResults */
export function replayDriverChecks(allResults) {
  const lines = [];
  for (const r of drivers(allResults)) {
    const rps = r.requests_per_s >= TARGET_RPS ? 'MET ' : 'MISS';
    const cpu = r.cpu_us_per_request <= TARGET_CPU_US ? 'MET ' : 'MISS';
    lines.push(
      `  ${rps}  replay driver (${r.leg}) >= ${TARGET_RPS.toLocaleString('en-US')} req/s: ${r.requests_per_s.toLocaleString('en-US')} req/s`,
      `  ${cpu}  replay driver (${r.leg}) <= ${TARGET_CPU_US} µs CPU per request: ${r.cpu_us_per_request.toFixed(1)} µs`,
    );
  }
  return lines;
}

/** @param {readonly object[]} allResults */
export function renderReplayDriverResults(allResults) {
  const rows = drivers(allResults);
  if (rows.length === 0) return [];
  const out = ['## replay-driver: what `kvroute replay` itself costs (issue #15)', ''];
  out.push(
    '`replay()` in the bench process against bench/proxy-stub.ts (uWebSockets.js, its own process, 4 SSE chunks per answer), requests of one 16-token block: `session` is 256 sessions in a closed loop, `poisson` an open loop at 10^6 req/s. Driver CPU is `process.cpuUsage` of the bench process per request; the stub shares the 2 cores, so req/s is a floor. [bench/replay-driver.ts](replay-driver.ts).',
    '',
  );
  out.push(
    '| leg | requests | reps | req/s (median) | CPU µs/request | errors | date |',
    '|---|---:|---:|---:|---:|---:|---|',
  );
  for (const r of rows)
    out.push(
      `| ${r.leg} | ${r.requests} | ${r.repetitions} | ${r.requests_per_s.toLocaleString('en-US')} | ${r.cpu_us_per_request.toFixed(1)} | ${r.errors} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
