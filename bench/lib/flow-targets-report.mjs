// @ts-check
// Issue #31's flow-targets workload: its target lines and its section of bench/RESULTS.md.

/** @typedef {import('../flow-targets.mjs').FlowTargetResult & { date?: string }} FlowTargetResult */

/** @param {readonly object[]} results */
const rows = (results) =>
  /** @type {FlowTargetResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'flow-target'));

/** @param {FlowTargetResult} r */
const sense = (r) => (r.target === 'jain' ? '>=' : '<=');

/** @param {readonly object[]} allResults */
export function flowTargetChecks(allResults) {
  return rows(allResults).map(
    (r) =>
      `  ${r.pass ? 'PASS' : 'FAIL'}  flow ${r.target}: ${r.what} ${sense(r)} ${r.bound}${r.unit}: ${r.value}${r.unit} (${r.detail})`,
  );
}

/** @param {readonly object[]} allResults */
export function renderFlowTargetResults(allResults) {
  const found = rows(allResults);
  if (found.length === 0) return [];
  const out = ['## flow-targets: flow control against issue #31’s targets, in the simulator', ''];
  out.push(
    'The traces of docs/flow-control.md (`scripts/flow-demo-trace.mjs`: Poisson arrivals, fresh 2,048-token prompts unless set, 64 output tokens), 4 simulated instances, min_ttft; the simulator’s clock is virtual, so the figures do not depend on the machine. [bench/flow-targets.mjs](flow-targets.mjs).',
    '',
    '| target | what | figure | bound | holds | detail | date |',
    '|---|---|---:|---:|---|---|---|',
  );
  for (const r of found)
    out.push(
      `| ${r.target} | ${r.what} | ${r.value}${r.unit} | ${sense(r)} ${r.bound}${r.unit} | ${r.pass ? 'yes' : 'no'} | ${r.detail} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
