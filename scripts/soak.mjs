#!/usr/bin/env node
// @ts-check
/**
 * The soak with faults (issue 30, docs/reliability.md "Soak"): `kvroute serve --threads 2` in
 * front of simulated engines, each its own process, under a steady mix of streaming and
 * non-streaming multi-turn chat, while a seeded scheduler injects every fault kind
 * (scripts/soak/faults.mjs). It prints a markdown table, writes a JSON report and exits 1 on a lost
 * request, an unexplained failure, a proxy crash, a leak or a fault not survived
 * (scripts/soak/report.mjs).
 *
 *   npm run soak -- [--duration 600] [--seed 1] [--engines 3] [--concurrency 6] [--speed 10]
 *                   [--threads 2] [--tokenizer qwen3] [--json bench/out/soak-report.json]
 *                   [--rss-slack-mib 128] [--rss-rise-mib 32] [--heap-rise-mib 16]
 *                   [--fd-slack 8]
 *
 * Timeline of a run of D seconds: warm-up (10% of D, at most 30 s), then faults one at a time,
 * about one round of every kind per 2 minutes, until 10% of D before the end; the load stops at D
 * (or when the last fault ends, if later), then the proxy is left idle until its descriptors are
 * back (at most 30 s). Fault hold times scale with D/300 (between 0.25× and 1×), so a short run
 * still sees every kind. Everything runs on 127.0.0.1 as children of this process, stopped by pid
 * on every path. Build first (`npm run build`): it runs dist/cli.js.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

import { request } from 'undici';

import { killAllNow, ROOT, stopAll, stopChild } from './soak/children.mjs';
import { faultActions, runFaults } from './soak/faults.mjs';
import { Engine, freePort, startProxy } from './soak/fleet.mjs';
import { KvRelay } from './soak/kv-relay.mjs';
import { createClient, runLoad } from './soak/load.mjs';
import { metricSum, Monitor, procStatus, scrape } from './soak/monitor.mjs';
import { Outcomes } from './soak/outcomes.mjs';
import { seededRandom, until } from './soak/random.mjs';
import { buildReport, reportTable } from './soak/report.mjs';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '600' },
    seed: { type: 'string', default: '1' },
    engines: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '6' },
    speed: { type: 'string', default: '10' },
    threads: { type: 'string', default: '2' },
    tokenizer: { type: 'string' },
    json: { type: 'string', default: join(ROOT, 'bench', 'out', 'soak-report.json') },
    'rss-slack-mib': { type: 'string', default: '128' },
    'rss-rise-mib': { type: 'string', default: '32' },
    'heap-rise-mib': { type: 'string', default: '16' },
    'fd-slack': { type: 'string', default: '8' },
  },
});

/**
 * @param {string} name
 * @param {number} min
 */
function numberFlag(name, min) {
  const raw = /** @type {string} */ (/** @type {Record<string, unknown>} */ (values)[name]);
  const value = Number(raw);
  if (!Number.isFinite(value) || value < min) {
    console.error(`soak: --${name} must be a number ≥ ${min}, got "${raw}"`);
    process.exit(2);
  }
  return value;
}

const durationS = numberFlag('duration', 10);
const seed = Math.floor(numberFlag('seed', 0));
const engineCount = Math.floor(numberFlag('engines', 2));
const concurrency = Math.floor(numberFlag('concurrency', 1));
const speed = numberFlag('speed', 0.1);
const threads = Math.floor(numberFlag('threads', 1));
const limits = {
  rssSlackMiB: numberFlag('rss-slack-mib', 0),
  rssRiseMiB: numberFlag('rss-rise-mib', 0),
  heapRiseMiB: numberFlag('heap-rise-mib', 0),
  fdSlack: Math.floor(numberFlag('fd-slack', 0)),
};
const MAX_BODY = '1MiB';
const MAX_BODY_BYTES = 2 ** 20;
const MAX_REQUESTS = 2_000_000;

const log = (/** @type {string} */ line) => console.error(`soak: ${line}`);

// Every path out stops the children by pid: the normal end, an error, a signal, the exit itself.
process.on('exit', killAllNow);
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) {
  process.once(signal, () => {
    log(`${signal}: stopping every child`);
    void stopAll().finally(() => process.exit(130));
  });
}

async function main() {
  const t0 = Date.now();
  const warmupMs = Math.min(30_000, durationS * 100);
  const endMs = durationS * 1000;
  const hold = Math.min(1, Math.max(0.25, durationS / 300));
  const settings = {
    durationS,
    seed,
    engines: engineCount,
    concurrency,
    speed,
    threads,
    tokenizer: values.tokenizer ?? null,
    maxBody: MAX_BODY,
    hold,
    limits,
  };
  log(`starting ${engineCount} engines + 1 spare, ${durationS} s, seed ${seed}`);

  const engineOptions = { speed, tokenizer: values.tokenizer };
  const engines = Array.from({ length: engineCount }, (_, i) => new Engine(i, engineOptions));
  const spare = new Engine(engineCount, engineOptions);
  await Promise.all(engines.map((e) => e.start()));
  const relays = await Promise.all(engines.map(async (e) => new KvRelay(e.kvUrl, await freePort())));
  await Promise.all(relays.map((r) => r.start()));
  const proxy = await startProxy({
    engines,
    kvUrls: relays.map((r) => r.url),
    threads,
    speed,
    tokenizer: values.tokenizer,
    maxBody: MAX_BODY,
  });
  /** @type {string | null} */
  let crashed = null;
  let stopping = false;
  proxy.child.once('exit', (code, signal) => {
    if (!stopping) crashed = `exited ${code ?? signal} during the soak; stderr: ${proxy.stderr().slice(-2000)}`;
  });
  const proxyAlive = () => crashed === null;
  const pid = /** @type {number} */ (proxy.child.pid);
  log(`proxy pid ${pid} at ${proxy.base}`);
  const ready = await until(async () => (await request(`${proxy.base}/ready`)).statusCode === 200, 30_000);
  if (!ready) throw new Error('the proxy never became ready');
  const models = await (await request(`${proxy.base}/v1/models`)).body.json();
  const model = /** @type {any} */ (models).data[0].id;

  const outcomes = new Outcomes();
  const agent = createClient(concurrency);
  const ctx = { base: proxy.base, agent, outcomes, model };
  const monitor = new Monitor(pid, proxy.base, t0);
  await monitor.sample(); // 'start': idle, before any load
  monitor.phase = 'warmup';
  monitor.start(Math.max(1000, durationS * 10));
  setTimeout(() => (monitor.phase = 'load'), warmupMs);

  let faultsDone = false;
  const running = () => proxyAlive() && (Date.now() - t0 < endMs || !faultsDone);
  const load = runLoad({ ...ctx, concurrency, seed, running, maxRequests: MAX_REQUESTS });
  const actions = faultActions({
    base: proxy.base,
    model,
    engines,
    spare,
    relays,
    ctx,
    random: seededRandom(seed),
    hold,
    maxBodyBytes: MAX_BODY_BYTES,
    proxyAlive,
  });
  const faultWindowMs = endMs - 2 * warmupMs;
  const injected = await runFaults(actions, {
    random: seededRandom(seed + 1),
    from: t0 + warmupMs,
    until: t0 + endMs - warmupMs,
    // About one round of every kind per 2 minutes of the fault window (at least one round).
    spacingMs: faultWindowMs / (10 * Math.max(1, Math.floor(faultWindowMs / 120_000))),
    proxyAlive,
    log,
  });
  faultsDone = true;
  await load;
  await agent.close();
  log(`load stopped after ${((Date.now() - t0) / 1000).toFixed(0)} s; waiting for the proxy to settle`);

  monitor.stop();
  monitor.phase = 'settle';
  /** @type {Record<string, number>} */
  const kv = {};
  if (proxyAlive()) {
    const start = /** @type {import('./soak/monitor.mjs').Monitor['samples'][number]} */ (monitor.samples[0]);
    // Idle keep-alive connections (the proxy's to the engines, about 4 s) close on their own.
    await until(
      () => {
        const now = procStatus(pid);
        return now.fds <= start.fds + limits.fdSlack && now.sockets <= start.sockets + limits.fdSlack;
      },
      30_000,
      500,
    );
    monitor.phase = 'settled';
    await monitor.sample();
    const metrics = await scrape(proxy.base);
    for (const [key, name] of [
      ['gaps', 'kvroute_kv_events_gaps_total'],
      ['missing', 'kvroute_kv_events_missing_messages_total'],
      ['replays', 'kvroute_kv_events_replays_total'],
      ['replayFailures', 'kvroute_kv_events_replay_failures_total'],
      ['rebuilds', 'kvroute_kv_events_rebuilds_total'],
      ['restarts', 'kvroute_kv_events_restarts_total'],
      ['disconnects', 'kvroute_kv_events_disconnects_total'],
    ])
      kv[/** @type {string} */ (key)] = metricSum(metrics, /** @type {string} */ (name));
  }
  kv.relayDropped = relays.reduce((s, r) => s + r.dropped, 0);
  kv.relayForwarded = relays.reduce((s, r) => s + r.forwarded, 0);
  stopping = true;
  const exitCode = crashed === null ? await stopChild(proxy.child, 15_000) : null;
  await Promise.all(relays.map((r) => r.stop()));
  await stopAll();

  const report = buildReport({
    outcomes,
    injected,
    samples: monitor.samples,
    proxy: { crashed, exitCode },
    kv,
    limits,
    settings,
  });
  console.log(reportTable(report));
  const jsonPath = resolve(/** @type {string} */ (values.json));
  mkdirSync(dirname(jsonPath), { recursive: true });
  writeFileSync(jsonPath, `${JSON.stringify(report, null, 2)}\n`);
  log(`report written to ${jsonPath}`);
  return report.passed ? 0 : 1;
}

main().then(
  (code) => process.exit(code),
  async (error) => {
    console.error(`soak: ${error instanceof Error ? error.stack : error}`);
    await stopAll();
    process.exit(1);
  },
);
