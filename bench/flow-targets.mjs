// @ts-check
// Workload (issue #31): flow control's targets, measured in the simulator on the traces of
// docs/flow-control.md (scripts/flow-demo-trace.mjs), 4 instances, min_ttft:
// - noisy: under 2x the fleet's rate one tenant sends 10x each of three others; the quiet
//   tenants' worst TTFT p90 against the same quiet requests alone (target <= 1.2x);
// - jain: four backlogged tenants of unequal prompt sizes; Jain's index of tokens served (>= 0.95);
// - priority: 2x overload, 10 % of it high class; the high class's TTFT p90 against the same
//   high requests alone (<= 1.1x);
// - shedding: 3x overload with shedding at an SLO of 1 s: the admitted requests' TTFT p90 within
//   the SLO, where the same run without shedding is past it.
// Each result says the figure, its bound and whether it holds; none is a timing of this machine
// (the simulator's clock is virtual), so the figures are the same on every run.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { workloadMain } from './lib/cli.mjs';
import { demoTraceLines } from '../scripts/flow-demo-trace.mjs';
import { flowMetrics } from '../dist/analysis/flow-metrics.js';
import { runMetrics } from '../dist/analysis/run-metrics.js';
import { simulate } from '../dist/sim/simulator.js';
import { readTrace } from '../dist/trace/read-trace.js';

/**
 * @typedef {{
 *   workload: 'flow-targets', kind: 'flow-target', target: string, what: string,
 *   value: number, bound: number, unit: string, pass: boolean, detail: string,
 * }} FlowTargetResult
 */

/** @typedef {import('../dist/trace/types.js').TraceRequest} TraceRequest */

const dir = mkdtempSync(join(tmpdir(), 'kvroute-flow-targets-'));
let traces = 0;

/**
 * The demo trace of `specs`, read back as the simulator reads any trace; `keep` filters tenants.
 * @param {string[]} specs @param {number} seconds @param {(tenant: string) => boolean} [keep]
 * @returns {Promise<TraceRequest[]>}
 */
async function traceOf(specs, seconds, keep = () => true) {
  const path = join(dir, `t${traces++}.jsonl`);
  const lines = demoTraceLines(specs, seconds).filter((l) => keep(/** @type {string} */ (l.tenant)));
  writeFileSync(path, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
  /** @type {TraceRequest[]} */
  const out = [];
  for await (const request of readTrace(path)) out.push(request);
  return out;
}

/** @param {TraceRequest[]} trace @param {import("../dist/sim/sim-flow.js").SimFlowOptions} flow */
function run(trace, flow) {
  const records = simulate(trace, { policy: 'min_ttft', instances: 4, flow }).records;
  return {
    records,
    flow: /** @type {import('../dist/analysis/flow-metrics.js').FlowMetrics} */ (flowMetrics(records)),
  };
}

/** @param {import('../dist/analysis/flow-metrics.js').FlowGroupMetrics[]} groups @param {string} name */
const p90Of = (groups, name) => /** @type {{ ttft_p90_s: number }} */ (groups.find((g) => g.name === name)).ttft_p90_s;

/**
 * @param {string} target @param {string} what @param {number} value @param {number} bound
 * @param {'<=' | '>='} sense @param {string} unit @param {string} detail
 * @returns {FlowTargetResult}
 */
function result(target, what, value, bound, sense, unit, detail) {
  const rounded = Number(value.toFixed(3));
  const pass = sense === '<=' ? rounded <= bound : rounded >= bound;
  return { workload: 'flow-targets', kind: 'flow-target', target, what, value: rounded, bound, unit, pass, detail };
}

workloadMain('flow-targets', async ({ quick }) => {
  const seconds = quick ? 20 : 60;
  const quiet = ['q1', 'q2', 'q3'];
  /** @type {FlowTargetResult[]} */
  const results = [];
  try {
    const noisySpecs = ['noisy=35', 'q1=3.5', 'q2=3.5', 'q3=3.5'];
    const alone = run(await traceOf(noisySpecs, seconds, (t) => t !== 'noisy'), { maxInFlight: 20 });
    const crowded = run(await traceOf(noisySpecs, seconds), { maxInFlight: 20 });
    const worst = Math.max(...quiet.map((t) => p90Of(crowded.flow.tenants, t) / p90Of(alone.flow.tenants, t)));
    const quietAlone = Math.max(...quiet.map((t) => p90Of(alone.flow.tenants, t)));
    results.push(
      result(
        'noisy',
        "quiet tenants' TTFT p90 beside a 10x tenant at 2x load, worst ratio to alone",
        worst,
        1.2,
        '<=',
        'x',
        `--max-in-flight 20; alone ${(quietAlone * 1000).toFixed(0)} ms`,
      ),
    );

    const jain = run(await traceOf(['a=40@512', 'b=12@2048', 'c=8@4096', 'd=12@2048'], seconds), { maxInFlight: 16 });
    results.push(
      result(
        'jain',
        "Jain's index of tokens served, 4 backlogged tenants of unequal prompt sizes",
        jain.flow.jain_tokens,
        0.95,
        '>=',
        '',
        '--max-in-flight 16; prompts of 512, 2,048, 4,096, 2,048 tokens',
      ),
    );

    const prioritySpecs = ['hi=4:high', 'lo=40:low'];
    const highAlone = run(await traceOf(prioritySpecs, seconds, (t) => t === 'hi'), { maxInFlight: 20 });
    const overloaded = run(await traceOf(prioritySpecs, seconds), { maxInFlight: 20 });
    const highRatio = p90Of(overloaded.flow.classes, 'high') / p90Of(highAlone.flow.classes, 'high');
    results.push(
      result(
        'priority',
        "the high class's TTFT p90 at 2x overload, ratio to the same requests alone",
        highRatio,
        1.1,
        '<=',
        'x',
        `--max-in-flight 20; alone ${(p90Of(highAlone.flow.classes, 'high') * 1000).toFixed(0)} ms`,
      ),
    );

    const shedSpecs = ['a=10:high', 'b=20:normal', 'c=36:low'];
    const trace = await traceOf(shedSpecs, seconds);
    const unshed = runMetrics(run(trace, { maxInFlight: 0 }).records).ttft_s.p90;
    const shedRecords = run(trace, { maxInFlight: 0, config: { shedding: { sloMs: 1000 } } }).records;
    const admitted = runMetrics(shedRecords.filter((r) => r.status === undefined)).ttft_s.p90;
    const shed = shedRecords.filter((r) => r.error === 'shed').length;
    results.push(
      result(
        'shedding',
        "admitted requests' TTFT p90 at 3x overload with shedding at an SLO of 1 s",
        admitted,
        1,
        '<=',
        's',
        `without shedding ${unshed.toFixed(1)} s; ${shed} of ${shedRecords.length} shed`,
      ),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  for (const r of results)
    console.log(
      `  ${r.pass ? 'holds' : 'misses'}  ${r.what}: ${r.value}${r.unit} (bound ${r.bound}${r.unit}; ${r.detail})`,
    );
  return results;
});
