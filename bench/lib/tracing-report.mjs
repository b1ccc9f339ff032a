// @ts-check
// Issue #33's tracing workload: its target check and its section of bench/RESULTS.md.

/** @typedef {import('../tracing.js').TracingResult & { date?: string }} TracingResult */

/** @param {readonly object[]} results */
const rows = (results) => /** @type {TracingResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'tracing'));

/** @param {readonly object[]} allResults */
export function tracingChecks(allResults) {
  return rows(allResults).map(
    (r) =>
      `  ${r.added_cpu_us_per_req <= 10 ? 'PASS' : 'FAIL'}  tracing on adds <= 10 µs CPU per request: ${r.added_cpu_us_per_req} µs ` +
      `(median of ${r.reps} reps${r.slices === undefined ? '' : ` of ${r.slices} slices`}' on − mean of their two offs; medians off ${r.off_cpu_us_per_req} / ${r.off_again_cpu_us_per_req}, on ${r.on_cpu_us_per_req}; ` +
      `a rep's two off servers differ by ${r.off_spread_us_per_req}, median` +
      `${r.added_share_of_off === undefined ? '' : `; ${(r.added_share_of_off * 100).toFixed(1)}% of the untraced request's CPU`})`,
  );
}

/** @param {readonly object[]} allResults */
export function renderTracingResults(allResults) {
  const list = rows(allResults);
  if (list.length === 0) return [];
  const out = ['## tracing: OpenTelemetry off and on (issue #33)', ''];
  out.push(
    "`kvroute serve` in front of the stub engines, 64 connections of non-streaming chat, three servers started afresh each rep and loaded in turn, their measured load cut into slices (0.5 s each since 2026-12-05; `slices` in the JSON): tracing off, on (`--otlp-endpoint` to an OTLP/HTTP collector in its own process, [bench/otlp-sink.ts](otlp-sink.ts), that counts the spans; 3 spans per request, batched), and off again (the noise between two identical servers). Each server's figure is its process’s CPU per request (user + system), the median over the reps. Added: the median over the reps of on − (off + off again) / 2 within each rep (the JSON keeps every rep's figures, `cpu_by_rep_us`); before, on − min(off, off again) of the medians. Target: on adds <= 10 µs. [bench/tracing.ts](tracing.ts).",
    '',
    '| reps (× slices) | requests | spans exported | off µs/req | off again µs/req | on µs/req | added µs/req | date |',
    '|---:|---:|---:|---:|---:|---:|---:|---|',
  );
  for (const r of list)
    out.push(
      `| ${r.reps}${r.slices === undefined ? '' : ` × ${r.slices}`} | ${r.requests.toLocaleString('en-US')} | ${r.spans.toLocaleString('en-US')} | ${r.off_cpu_us_per_req} | ${r.off_again_cpu_us_per_req} | ${r.on_cpu_us_per_req} | ${r.added_cpu_us_per_req} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
