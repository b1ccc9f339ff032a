#!/usr/bin/env node
// @ts-check
/**
 * The live check of learned costs (issue 28, docs/proxy.md "Learned costs"): a two-class simulated
 * fleet over HTTP, `kvroute serve` in front, `kvroute replay` of a small synthesized trace, then
 *
 *   1. the costs the proxy learned (its /metrics kvroute_instance_* gauges) beside the true ones
 *      (the preset × the fleet's multipliers, as `sim run --json` reports them in learned_costs);
 *   2. the TTFT p90 of a few policies live beside `kvroute sim run` of the same trace and fleet,
 *      and whether the two rankings agree.
 *
 * It prints two markdown tables. Everything runs on loopback, as child processes of this one,
 * each stopped by its pid (SIGTERM, then SIGKILL after a grace); a deadline (--budget-s) bounds
 * the whole run. Build first: `npx tsc -p tsconfig.build.json` (it runs dist/cli.js).
 *
 * Time: the engines run `--speed` times faster than real time, and the replay plays the trace's
 * clock as fast, so wall-clock TTFTs and learned seconds are the engines' divided by the speed;
 * the tables multiply them back. The proxy's own time (a millisecond or so per request) is then
 * `speed` times larger in engine seconds: it lands in the learned overhead, not the per-token cost.
 * The proxy's prior is the preset's divided by the speed (`serve --cost-prior-scale 1/speed`):
 * a learned estimate stays within 10× of its prior, and the fast class at 5× is 10× the preset.
 * Keep the speed at about 5 or below: faster, the engines' decode steps (~5 ms of engine time)
 * fall under the event loop's timer granularity on a shared machine, and the live timings stop
 * being the model's.
 *
 *   node scripts/live-fleet-check.mjs [--sessions 36] [--duration 15] [--seed 11] [--speed 5]
 *                                     [--fleet 2,2:prefill=0.5:decode=0.7] [--budget-s 600] [--runs POLICY:COSTS,…]
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CLI = join(ROOT, 'dist', 'cli.js');

const { values } = parseArgs({
  options: {
    sessions: { type: 'string', default: '36' },
    duration: { type: 'string', default: '15' },
    seed: { type: 'string', default: '11' },
    speed: { type: 'string', default: '5' },
    fleet: { type: 'string', default: '2,2:prefill=0.5:decode=0.7' },
    'budget-s': { type: 'string', default: '600' },
    runs: { type: 'string', default: 'min_ttft:learned,min_ttft:fixed,lmetric:fixed,sticky:fixed' },
  },
});
const speed = Number(values.speed);
const deadline = Date.now() + Number(values['budget-s']) * 1000;
/** The runs: policy and --costs; the first must be a `learned` one (its costs are the first table). */
const RUNS = values.runs.split(',').map((run) => /** @type {[string, string]} */ (run.split(':')));

const children = new Set();

/**
 * Starts `kvroute ARGS`; resolves with the child and its first `lines` stdout lines matching `ready`.
 * @param {string[]} args
 * @param {RegExp} ready
 * @returns {Promise<{ child: import('node:child_process').ChildProcess, lines: string[] }>}
 */
function start(args, ready, lines = 1) {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let stderr = '';
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  return new Promise((resolve, reject) => {
    /** @type {string[]} */
    const got = [];
    let buffered = '';
    child.stdout.on('data', (d) => {
      buffered += d;
      let nl;
      while ((nl = buffered.indexOf('\n')) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 1);
        if (ready.test(line)) got.push(line);
        if (got.length === lines) resolve({ child, lines: got });
      }
    });
    child.once('exit', (code) => reject(new Error(`kvroute ${args[0]} exited ${code} before it was ready: ${stderr}`)));
  });
}

/**
 * Runs `kvroute ARGS` to its end (SIGTERM after `timeoutMs`); its stdout.
 * @param {string[]} args
 * @param {number} timeoutMs
 */
async function run(args, timeoutMs) {
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr = (stderr + d).slice(-4000)));
  const timer = setTimeout(() => child.kill('SIGTERM'), Math.max(1000, timeoutMs));
  const [code] = await once(child, 'exit');
  clearTimeout(timer);
  children.delete(child);
  if (code !== 0) throw new Error(`kvroute ${args.slice(0, 2).join(' ')} exited ${code}: ${stderr}`);
  return stdout;
}

/**
 * Stops a child by its pid: SIGTERM, SIGKILL after 5 s.
 * @param {import('node:child_process').ChildProcess} child
 */
async function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/**
 * The proxy's kvroute_instance_* gauges: instance → { name → value }.
 * @param {string} base
 * @returns {Promise<Map<string, Record<string, number>>>}
 */
async function learnedCosts(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out = new Map();
  for (const line of text.split('\n')) {
    const m = /^kvroute_instance_(\w+)\{([^}]*)\} (\S+)$/.exec(line);
    if (m === null) continue;
    const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    const name = labels.kind === undefined ? String(m[1]) : `${m[1]}_${labels.kind}`;
    const instance = String(labels.instance);
    const entry = out.get(instance) ?? {};
    entry[name] = Number(m[3]);
    out.set(instance, entry);
  }
  return out;
}

/**
 * One live run: a fresh fleet (cold caches), the proxy, the replay; the replay summary and the learned costs.
 * @param {string} trace
 * @param {string} policy
 * @param {string} costs
 */
async function live(trace, policy, costs) {
  const engines = Number(values.fleet.split(',').reduce((n, g) => n + Number(g.split(':')[0]), 0));
  const fleet = await start(
    ['sim', 'serve', '--fleet', values.fleet, '--port', '0', '--host', '127.0.0.1', '--speed', String(speed)],
    /^http:\/\//,
    engines,
  );
  try {
    const urls = fleet.lines.map((l) => String(l.trim().split(/\s+/)[0]));
    const proxy = await start(
      [
        'serve',
        '--backends',
        urls.join(','),
        '--port',
        '0',
        '--host',
        '127.0.0.1',
        '--policy',
        policy,
        '--costs',
        costs,
        // The prior near the engines: the preset's times ÷ the speed (estimates stay within 10× of it).
        '--cost-prior-scale',
        String(1 / speed),
        '--reconcile-interval',
        '2000',
      ],
      /listening on/,
    );
    try {
      const base = String(/listening on (\S+)/.exec(proxy.lines[0] ?? '')?.[1]);
      const summary = JSON.parse(
        await run(
          ['replay', '--trace', trace, '--target', base, '--speed', String(speed), '--json'],
          deadline - Date.now(),
        ),
      );
      return { summary, urls, learned: await learnedCosts(base) };
    } finally {
      await stop(proxy.child);
    }
  } finally {
    await stop(fleet.child);
  }
}

/** @param {number} x */
const pct = (x) => `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(1)}%`;
/** @param {number} x */
const k = (x) => `${(x / 1000).toFixed(1)} k`;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-live-fleet-'));
  const stopAll = () => {
    for (const child of children) child.kill('SIGTERM');
  };
  process.once('SIGINT', stopAll);
  process.once('SIGTERM', stopAll);
  const overall = setTimeout(() => {
    process.stderr.write('live-fleet-check: over --budget-s, stopping\n');
    stopAll();
  }, deadline - Date.now());
  try {
    const trace = join(dir, 'trace.jsonl');
    await run(
      [
        'trace',
        'synth',
        '--sessions',
        values.sessions,
        '--duration',
        values.duration,
        '--seed',
        values.seed,
        '-o',
        trace,
      ],
      60_000,
    );
    const simulated = new Map();
    for (const [policy, costs] of RUNS) {
      const json = JSON.parse(
        await run(
          ['sim', 'run', trace, '--fleet', values.fleet, '--policy', policy, '--costs', costs, '--json'],
          120_000,
        ),
      );
      simulated.set(`${policy} ${costs}`, json);
    }
    // The first run is a learned one (see RUNS): its simulation's learned_costs carry the truth.
    const [firstPolicy, firstCosts] = /** @type {[string, string]} */ (RUNS[0]);
    const truth = simulated.get(`${firstPolicy} ${firstCosts}`).learned_costs;
    const rows = [];
    for (const [policy, costs] of RUNS) {
      const started = Date.now();
      const result = await live(trace, policy, costs);
      process.stderr.write(
        `live-fleet-check: ${policy} --costs ${costs}: ${result.summary.done} done, ${result.summary.errors} errors, ${((Date.now() - started) / 1000).toFixed(0)} s\n`,
      );
      rows.push({ policy, costs, ...result });
    }

    const header = `fleet \`${values.fleet}\`, ${values.sessions} synthesized sessions over ${values.duration} s (seed ${values.seed}), engines and replay at ${speed}× real time`;
    const learnedRun = /** @type {(typeof rows)[number]} */ (rows[0]);
    const lines = [
      `### Learned costs, live (\`kvroute serve --costs learned\`) vs true`,
      '',
      header,
      '',
      '| instance | group | learned prefill tok/s | true prefill tok/s | error | learned overhead s | true overhead s | learned decode step s | true decode step s | ttft obs | decode obs | sim run learned tok/s (error) |',
      '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    ];
    learnedRun.urls.forEach((url, i) => {
      const l = /** @type {Record<string, number>} */ (learnedRun.learned.get(url) ?? {});
      const t = truth[i];
      // Wall seconds are engine seconds ÷ speed: tokens/s × speed back.
      const tokensPerSecond = Number(l.prefill_tokens_per_second) / speed;
      lines.push(
        `| ${i} | ${t.group ?? 'all'} | ${k(tokensPerSecond)} | ${k(t.truth.prefill_tokens_per_s)} | ${pct(t.truth.prefill_tokens_per_s / tokensPerSecond - 1)} | ${(Number(l.prefill_overhead_seconds) * speed).toFixed(3)} | ${t.truth.prefill_overhead_s.toFixed(3)} | ${(Number(l.decode_step_seconds) * speed).toFixed(4)} | ${t.truth.decode_step_s.toFixed(4)} | ${l.cost_observations_ttft} | ${l.cost_observations_decode} | ${k(t.learned.prefill_tokens_per_s)} (${pct(t.prefill_relative_error)}) |`,
      );
    });
    lines.push(
      '',
      '"error": learned ÷ true prefill seconds per token − 1 (as `sim run --json` prefill_relative_error).',
      '',
      `### TTFT p90 by policy: live vs \`kvroute sim run\``,
      '',
      header,
      '',
      '| policy | costs | live TTFT p90 s | live rank | sim TTFT p90 s | sim rank | live done / errors |',
      '|---|---|---:|---:|---:|---:|---:|',
    );
    const liveP90 = rows.map((r) => r.summary.ttft_p90_s * speed);
    const simP90 = rows.map((r) => simulated.get(`${r.policy} ${r.costs}`).ttft_s.p90);
    /** @param {number[]} xs */
    const rank = (xs) => xs.map((x) => 1 + xs.filter((y) => y < x).length);
    const liveRank = rank(liveP90);
    const simRank = rank(simP90);
    rows.forEach((r, i) => {
      lines.push(
        `| ${r.policy} | ${r.costs} | ${Number(liveP90[i]).toFixed(2)} | ${liveRank[i]} | ${Number(simP90[i]).toFixed(2)} | ${simRank[i]} | ${r.summary.done} / ${r.summary.errors} |`,
      );
    });
    const agree = liveRank.every((x, /** @type {number} */ i) => x === simRank[i]);
    lines.push('', `Rankings ${agree ? 'agree' : 'differ'} (live TTFTs in engine seconds: wall × ${speed}).`);
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    clearTimeout(overall);
    for (const child of [...children]) await stop(child);
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((error) => {
  process.stderr.write(`live-fleet-check: ${error.stack ?? error}\n`);
  process.exitCode = 1;
});
