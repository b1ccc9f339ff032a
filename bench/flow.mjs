// @ts-check
// Workload (issue #31, flow control): the CPU one request costs flow control on the proxy's hot
// path with 1,000 tenants: identify() from its headers, FlowController.enter() (rate limits, a
// slot or the fair queue), leave() and next() handing the slot to the next waiter, and chargeOutput(); the
// queue kept deep (every request waits), which is the expensive case. Beside it, in the same
// process, the plain FIFO of a count-and-array admission (what --max-in-flight was before), so
// the ratio says what fairness costs. CPU time from process.cpuUsage(), per request.
import { loadavg } from 'node:os';

import { workloadMain } from './lib/cli.mjs';
import { resolveFlowConfig } from '../dist/flow/flow-config.js';
import { FlowController } from '../dist/flow/flow-controller.js';
import { identify } from '../dist/flow/flow-identity.js';
import { SynthRandom } from '../dist/trace/synth-random.js';

/**
 * @typedef {{
 *   workload: 'flow', kind: 'flow', tenants: number, limited_tenants: number, queue_depth: number,
 *   requests: number, flow_us: number, fifo_us: number, ratio: number, load_avg: string,
 * }} FlowResult
 */

/**
 * CPU µs per request of `run(requests)`, the best of `reps` (the machine is shared).
 * @param {(n: number) => void} run
 * @param {number} requests
 * @param {number} reps
 */
function cpuPerRequest(run, requests, reps) {
  let best = Infinity;
  for (let r = 0; r < reps; r++) {
    globalThis.gc?.();
    const start = process.cpuUsage();
    run(requests);
    const used = process.cpuUsage(start);
    best = Math.min(best, (used.user + used.system) / requests);
  }
  return best;
}

workloadMain('flow', ({ quick }) => {
  const tenants = 1_000;
  const depth = 512;
  const requests = quick ? 100_000 : 400_000;
  const source = new SynthRandom(31);
  const rng = () => source.next();
  const names = Array.from({ length: tenants }, (_, i) => `tenant-${i}`);
  /** @type {Record<string, object>} */
  const tenantSpecs = {};
  // Every tenant weighted, one in ten with generous rate limits (the check runs, never refuses).
  names.forEach((name, i) => {
    tenantSpecs[name] = i % 10 === 0 ? { weight: 1 + (i % 4), rpm: 1e9, tpm: 1e12 } : { weight: 1 + (i % 4) };
  });
  const config = resolveFlowConfig({ tenants: tenantSpecs });
  // A Zipf-like mix: a few tenants send most requests, as in a shared fleet.
  const picks = Array.from({ length: 65_536 }, () => /** @type {string} */ (names[Math.floor(tenants * rng() ** 3)]));
  const classes = ['high', 'normal', 'normal', 'normal', 'low'];
  /** @type {import('../dist/flow/flow-identity.js').FlowHeaders[]} */
  const headers = picks.map((tenant, i) => ({
    tenant,
    priority: /** @type {string} */ (classes[i % classes.length]),
    deadline: '',
    authorization: '',
    apiKey: '',
  }));
  const costs = Float64Array.from({ length: 65_536 }, () => Math.floor(200 + 20_000 * rng() ** 4));
  /** @param {number} k */
  const header = (k) => /** @type {import('../dist/flow/flow-identity.js').FlowHeaders} */ (headers[k & 65535]);
  /** @param {number} k */
  const cost = (k) => /** @type {number} */ (costs[k & 65535]);

  const flowRun = (/** @type {number} */ n) => {
    const flow = new FlowController(config, { maxInFlight: 64, queueSize: 1 << 20, queueTimeoutMs: 1e12 });
    let now = 0;
    // The slot holders (tenant, prompt tokens), oldest first: each step the oldest gives its slot back.
    /** @type {Array<{ tenant: string, tokens: number }>} */
    const holders = [];
    let oldest = 0;
    // Fill the slots and the queue: every request below waits behind `depth` others.
    for (let i = 0; i < 64 + depth; i++) {
      const id = identify(header(i), config);
      const entry = { tenant: id.tenant, classRank: id.classRank, cost: cost(i), inputTokens: cost(i) };
      if (flow.enter(i, entry, now).kind === 'go') holders.push({ tenant: id.tenant, tokens: entry.inputTokens });
    }
    for (let i = 0; i < n; i++) {
      now += 0.01;
      const id = identify(header(i), config);
      const entry = { tenant: id.tenant, classRank: id.classRank, cost: cost(i), inputTokens: cost(i) };
      if (flow.enter(i, entry, now).kind === 'go') holders.push({ tenant: id.tenant, tokens: entry.inputTokens });
      const holder = /** @type {{ tenant: string, tokens: number }} */ (holders[oldest++]);
      flow.leave(holder.tenant, holder.tokens, now);
      for (let next = flow.next(now); next !== undefined; next = flow.next(now)) {
        flow.chargeOutput(next.tenant, 100, now);
        holders.push({ tenant: next.tenant, tokens: next.inputTokens });
      }
      if (oldest > 4096) {
        holders.splice(0, oldest);
        oldest = 0;
      }
    }
    // Every request entered holds a slot, waits, or gave its slot back (one per step): none lost.
    if (flow.active + flow.queued !== 64 + depth)
      throw new Error(`flow: ${flow.active} holding + ${flow.queued} waiting, expected ${64 + depth}`);
  };
  const fifoRun = (/** @type {number} */ n) => {
    // The old admission: a count and a FIFO of waiters (a Map in insertion order).
    const waiting = new Map();
    let active = 0;
    for (let i = 0; i < 64 + depth; i++) {
      if (active < 64) active++;
      else waiting.set({ i }, i);
    }
    for (let i = 0; i < n; i++) {
      if (active < 64) active++;
      else waiting.set({ i }, i);
      const head = waiting.entries().next();
      if (!head.done) waiting.delete(head.value[0]);
      else active--;
    }
    if (waiting.size !== depth) throw new Error(`fifo: the queue drifted to ${waiting.size}`);
  };
  const reps = quick ? 2 : 5;
  const flowUs = cpuPerRequest(flowRun, requests, reps);
  const fifoUs = cpuPerRequest(fifoRun, requests, reps);
  const load = loadavg()[0] ?? 0;
  /** @type {FlowResult} */
  const result = {
    workload: 'flow',
    kind: 'flow',
    tenants,
    limited_tenants: tenants / 10,
    queue_depth: depth,
    requests,
    flow_us: Number(flowUs.toFixed(3)),
    fifo_us: Number(fifoUs.toFixed(3)),
    ratio: Number((flowUs / fifoUs).toFixed(1)),
    load_avg: load.toFixed(2),
  };
  console.log(
    `  ${tenants} tenants (${result.limited_tenants} rate-limited), ${depth} waiting: flow control ${result.flow_us} µs CPU per request ` +
      `(identify + enter + leave + charge), plain FIFO ${result.fifo_us} µs (${result.ratio}x); load ${result.load_avg}`,
  );
  return [result];
});
