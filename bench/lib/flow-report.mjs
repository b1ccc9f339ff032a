// @ts-check
// Issue #31's flow workload: its target check and its section of bench/RESULTS.md.

/** @typedef {import('../flow.mjs').FlowResult & { date?: string }} FlowResult */

/** @param {readonly object[]} results */
const rows = (results) => /** @type {FlowResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'flow'));

/** @param {readonly object[]} allResults */
export function flowChecks(allResults) {
  return rows(allResults).map(
    (r) =>
      `  ${r.flow_us <= 2 ? 'PASS' : 'FAIL'}  flow control <= 2 µs CPU per request with ${r.tenants.toLocaleString('en-US')} tenants: ` +
      `${r.flow_us} µs (${r.ratio}x a plain FIFO's ${r.fifo_us} µs)`,
  );
}

/** @param {readonly object[]} allResults */
export function renderFlowResults(allResults) {
  const found = rows(allResults);
  if (found.length === 0) return [];
  const out = ['## flow: flow control on the hot path (issue #31)', ''];
  out.push(
    "CPU per request of flow control as the proxy runs it: `identify()` from the headers, `FlowController.enter()` (rate limits, then the fair queue), `leave()` giving the slot back and `next()` taking the waiters that may have it (the headroom's share check included, since 2e68cac), `chargeOutput()`. 1,000 tenants with weights 1–4, one in ten with rate limits, a Zipf-like mix (a few tenants send most), five classes of traffic over high/normal/low, costs of 200 to 20,200 tokens; 64 slots and 512 requests always waiting, so every request queues (the expensive path). Beside it in the same process, the plain FIFO admission had before (a count and a Map). The best of several repetitions, from `process.cpuUsage()`. Target: <= 2 µs. [bench/flow.mjs](flow.mjs).",
    '',
    '| tenants | rate-limited | waiting | requests | flow control µs/request | plain FIFO µs/request | ratio | load average | date |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const r of found)
    out.push(
      `| ${r.tenants.toLocaleString('en-US')} | ${r.limited_tenants} | ${r.queue_depth} | ${r.requests.toLocaleString('en-US')} | ${r.flow_us} | ${r.fifo_us} | ${r.ratio}x | ${r.load_avg} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
