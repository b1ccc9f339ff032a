// @ts-check
// Workload (issue #4): `kvroute sim run` speed.
// - default: the default synthetic trace (`kvroute trace synth`, ~1,250 requests) through 8
//   instances, once per policy, with the router's shadow state and with the 50 ms shm feed.
//   Target: <= 2 s wall per run.
// - 100k: the generator at --scale 80 with --duration 139,200 s, which keeps the default
//   trace's mean arrival rate (1,255 requests over ~1,740 s) for ~99k requests, streamed from
//   the generator through 8 instances under unified+A+B. Target: <= 60 s wall. Skipped by --quick.
import { POLICY_NAMES } from '../dist/index.js';
import { synthesizeTrace } from '../dist/entries/trace.js';
import { simulate } from '../dist/sim/simulator.js';
import { workloadMain } from './lib/cli.mjs';

/**
 * @typedef {{
 *   workload: 'simulate', kind: 'simulation', trace: 'default' | '100k', policy: string,
 *   engine_state: string, requests: number, steps: number, seconds: number, virtual_seconds: number,
 *   peak_rss_bytes: number,
 * }} SimulationResult
 */

const LARGE_TRACE = { scale: 80, duration: 139_200 };

workloadMain('simulate', ({ quick }) => {
  const trace = [...synthesizeTrace()];
  /** @type {readonly import('../dist/index.js').PolicyName[]} */
  const policies = quick ? ['unified+A+B'] : POLICY_NAMES;
  /** @type {SimulationResult[]} */
  const results = [];
  // One untimed run first, so the JIT is warm for the first policy measured.
  simulate(trace, { policy: 'unified', instances: 8 });
  for (const policy of policies) {
    for (const engineState of /** @type {const} */ (['shadow', 'shm'])) {
      const started = performance.now();
      const run = simulate(trace, { policy, instances: 8, engineState });
      results.push(report('default', policy, engineState, trace.length, run, started));
    }
  }
  if (!quick) {
    let requests = 0;
    const counted = function* () {
      for (const request of synthesizeTrace(LARGE_TRACE)) {
        requests++;
        yield request;
      }
    };
    const started = performance.now();
    const run = simulate(counted(), { policy: 'unified+A+B', instances: 8 });
    results.push(report('100k', 'unified+A+B', 'shadow', requests, run, started));
  }
  return results;
});

/**
 * @param {'default' | '100k'} trace
 * @param {string} policy
 * @param {string} engineState
 * @param {number} requests
 * @param {import('../dist/sim/simulator.js').SimulationResult} run
 * @param {number} started
 * @returns {SimulationResult}
 */
function report(trace, policy, engineState, requests, run, started) {
  const seconds = (performance.now() - started) / 1000;
  console.log(
    `  ${trace.padEnd(8)} ${policy.padEnd(16)} ${engineState.padEnd(6)} ${requests.toLocaleString('en-US')} requests, ${run.steps.toLocaleString('en-US')} engine steps: ${seconds.toFixed(2)} s wall (${run.makespan.toFixed(0)} s simulated)`,
  );
  return {
    workload: 'simulate',
    kind: 'simulation',
    trace,
    policy,
    engine_state: engineState,
    requests,
    steps: run.steps,
    seconds,
    virtual_seconds: run.makespan,
    peak_rss_bytes: process.resourceUsage().maxRSS * 1024,
  };
}
