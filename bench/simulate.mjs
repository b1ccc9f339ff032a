// @ts-check
// Workload (issue #4, in progress): `kvroute sim run` speed. The default synthetic trace
// (`kvroute trace synth`, ~1,250 requests) through 8 instances, once per policy, with the
// router's shadow state and with the 50 ms shm feed. Target: ≤ 2 s wall per run.
import { POLICY_NAMES, synthesizeTrace } from '../dist/index.js';
import { simulate } from '../dist/sim/simulator.js';
import { workloadMain } from './lib/cli.mjs';

/**
 * @typedef {{
 *   workload: 'simulate', kind: 'simulation', policy: string, engine_state: string, requests: number,
 *   steps: number, seconds: number, virtual_seconds: number,
 * }} SimulationResult
 */

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
      const seconds = (performance.now() - started) / 1000;
      console.log(
        `  ${policy.padEnd(16)} ${engineState.padEnd(6)} ${trace.length} requests, ${run.steps.toLocaleString('en-US')} engine steps: ${seconds.toFixed(2)} s wall (${run.makespan.toFixed(0)} s simulated)`,
      );
      results.push({
        workload: 'simulate',
        kind: 'simulation',
        policy,
        engine_state: engineState,
        requests: trace.length,
        steps: run.steps,
        seconds,
        virtual_seconds: run.makespan,
      });
    }
  }
  return results;
});
