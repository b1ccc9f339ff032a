#!/usr/bin/env node
// @ts-check
// The index-accuracy experiment of docs/index-accuracy.md (issue #17): how exactly each cache
// index mode predicts the engines' `cached_tokens`, through the real proxy in front of
// `kvroute sim serve`, at two KV capacities. Per cell it starts the engines and the proxy as child
// processes on loopback, replays the trace through the proxy, and reads `kvroute analyze run`.
//
//   node scripts/index-accuracy.mjs --out DIR [--trace FILE] [--capacities 1,0.4] [--speed 10]
//     [--dispatch session|poisson] [--rate R] [--sglang N]
//
// --sglang N makes the last N of the 4 engines SGLang-flavoured (`sim serve --flavor sglang`, a
// second process): a mixed vLLM + SGLang fleet behind one proxy.
//
// --dispatch poisson sends the trace's requests at R per second in arrival order (replay's
// --mode poisson), interleaving sessions so that a session's next turn can find its blocks
// evicted; session dispatch (the default) follows each session's own timing.
//
// Modes:
//   hash_ids  engines cache by the trace's block ids; the proxy keys by the body's hash_ids;
//   text      engines tokenize (Qwen3) and cache by token blocks; the proxy keys by text chunks;
//   events    the same engines publish KV events; the proxy tokenizes and keys by token blocks,
//             matched against the engines' events.
// Writes DIR/<mode>-kv<capacity>.records (and .json: the analysis) and DIR/results.json, and
// prints the Markdown tables. Resumable: a cell whose .json exists is not run again.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli.js');
const MODES = ['hash_ids', 'text', 'events'];
const POLICY = 'unified+A+B';
const ENGINES = 4;

const { values } = parseArgs({
  options: {
    out: { type: 'string' },
    trace: { type: 'string' },
    capacities: { type: 'string', default: '1,0.4' },
    speed: { type: 'string', default: '10' },
    dispatch: { type: 'string', default: 'session' },
    rate: { type: 'string', default: '2' },
    modes: { type: 'string', default: MODES.join(',') },
    sglang: { type: 'string', default: '0' },
  },
});
if (values.out === undefined) {
  process.stderr.write('usage: node scripts/index-accuracy.mjs --out DIR [--trace FILE] [--capacities 1,0.05]\n');
  process.exit(2);
}
const out = values.out;
mkdirSync(out, { recursive: true });
const trace = values.trace ?? join(out, 'trace.jsonl');
if (values.trace === undefined && !existsSync(trace)) {
  run(['trace', 'synth', '--sessions', '30', '--duration', '120', '--seed', '3', '-o', trace]);
}

/** @param {string[]} args */
function run(args) {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`kvroute ${args.join(' ')} failed (${r.status}):\n${r.stderr}`);
  return r.stdout;
}

/**
 * Starts `kvroute ARGS` and resolves once `ready` accepts a stdout line, with the child and the
 * lines so far (more arrive in `lines`).
 * @param {string[]} args
 * @param {(line: string) => boolean} ready
 * @returns {Promise<{ child: import('node:child_process').ChildProcess, lines: string[], stderr: () => string }>}
 */
function start(args, ready) {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  /** @type {string[]} */
  const lines = [];
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kvroute ${args[0]} did not start:\n${stderr}`)), 60_000);
    child.once('exit', (code) => reject(new Error(`kvroute ${args.join(' ')} exited ${code}:\n${stderr}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      lines.push(line);
      if (ready(line)) {
        clearTimeout(timer);
        resolve({ child, lines, stderr: () => stderr });
      }
    });
  });
}

/**
 * Blocks the engines evicted over the run (kvroute_sim_evicted_blocks_total of each).
 * @param {string[]} urls
 */
async function evictedBlocks(urls) {
  let total = 0;
  for (const url of urls) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = /^kvroute_sim_evicted_blocks_total(?:\{[^}]*\})? (\S+)$/m.exec(text);
    total += m === null ? 0 : Number(m[1]);
  }
  return total;
}

/**
 * The proxy's KV event feed counters summed over the engines (kvroute_kv_events_*_total).
 * @param {string} base
 */
async function feedCounters(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  /** @type {Record<string, number>} */
  const totals = {};
  for (const name of ['gaps', 'missing_messages', 'replays', 'replay_failures', 'rebuilds', 'disconnects']) {
    const re = new RegExp(`^kvroute_kv_events_${name}_total(?:\\{[^}]*\\})? (\\S+)$`, 'gm');
    totals[name] = [...text.matchAll(re)].reduce((sum, m) => sum + Number(m[1]), 0);
  }
  return totals;
}

/** @param {import('node:child_process').ChildProcess} child */
function stop(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(undefined);
    child.once('exit', resolve);
    child.kill('SIGTERM');
  });
}

/** @param {string} mode @param {number} capacity */
async function cell(mode, capacity) {
  const sglangEngines = Number(values.sglang);
  const flavor = sglangEngines > 0 ? `-sglang${sglangEngines}` : '';
  const name = `${values.dispatch}-${mode}-kv${capacity}${flavor}`;
  const json = join(out, `${name}.json`);
  if (existsSync(json)) return JSON.parse(readFileSync(json, 'utf8'));
  const records = join(out, `${name}.records`);
  // Below Linux's ephemeral ports (32768 up): an outgoing connection may hold any port up there.
  const kvPort = 20000 + Math.floor(Math.random() * 12000);
  /** @param {number} count @param {number} firstKvPort @param {boolean} asSglang */
  const simArgs = (count, firstKvPort, asSglang) => {
    const args = ['sim', 'serve', '--instances', String(count), '--port', '0', '--speed', values.speed];
    args.push('--kv-capacity', String(capacity));
    if (mode !== 'hash_ids') args.push('--tokenizer', 'qwen3');
    if (mode === 'events') args.push('--kv-events', String(firstKvPort));
    if (asSglang) args.push('--flavor', 'sglang');
    return args;
  };
  const vllmEngines = ENGINES - sglangEngines;
  const engineArgs = simArgs(vllmEngines, kvPort, false);
  const sglangArgs = simArgs(sglangEngines, kvPort + vllmEngines, true);
  /** @type {Array<Awaited<ReturnType<typeof start>>>} */
  const fleets = [];
  /** @type {string[]} */
  const urls = [];
  let proxy;
  /** @type {number | undefined} */
  let evictions;
  /** @type {string[]} */
  const replayArgs = [];
  /** @type {string[]} */
  const serveArgs = [];
  /** @type {Record<string, number> | undefined} */
  let feed;
  try {
    for (const [count, args] of /** @type {const} */ ([
      [vllmEngines, engineArgs],
      [sglangEngines, sglangArgs],
    ])) {
      if (count === 0) continue;
      const engines = await start(args, () => true);
      fleets.push(engines);
      // One URL per engine on stdout.
      while (engines.lines.length < count) await new Promise((r) => setTimeout(r, 20));
      urls.push(...engines.lines.slice(0, count));
    }
    serveArgs.push('serve', '--backends', urls.join(','), '--port', '0', '--policy', POLICY);
    if (mode === 'events') {
      serveArgs.push('--kv-events', urls.map((_, i) => `tcp://127.0.0.1:${kvPort + i}`).join(','));
      serveArgs.push('--tokenizer', 'qwen3');
    }
    proxy = await start(serveArgs, (line) => line.includes('listening on'));
    const base = /listening on (\S+)/.exec(proxy.lines.at(-1) ?? '')?.[1];
    if (base === undefined) throw new Error('no proxy URL');
    replayArgs.push('replay', '--trace', trace, '--target', base, '--records', records);
    if (values.dispatch === 'poisson') replayArgs.push('--mode', 'poisson', '--rate', values.rate, '--seed', '1');
    else replayArgs.push('--speed', values.speed);
    if (mode !== 'hash_ids') replayArgs.push('--no-hash-ids');
    process.stderr.write(`${name}: kvroute ${replayArgs.join(' ')}\n`);
    run(replayArgs);
    evictions = await evictedBlocks(urls);
    if (mode === 'events') feed = await feedCounters(base);
  } finally {
    if (proxy !== undefined) await stop(proxy.child);
    for (const engines of fleets) await stop(engines.child);
  }
  const analysis = JSON.parse(run(['analyze', 'run', records, '--json']));
  const result = {
    mode,
    capacity,
    requests: analysis.requests,
    failed: analysis.failed,
    apc: analysis.apc,
    ttft_p90: analysis.ttft_s?.p90,
    evicted_blocks: evictions,
    kv_event_feed: feed,
    prediction: analysis.prediction,
    dispatch: values.dispatch,
    sglang_engines: sglangEngines,
    commands: {
      engines: vllmEngines > 0 ? engineArgs : undefined,
      sglang_engines: sglangEngines > 0 ? sglangArgs : undefined,
      proxy: serveArgs,
      replay: replayArgs,
    },
  };
  writeFileSync(json, `${JSON.stringify(result, null, 2)}\n`);
  return result;
}

const capacities = values.capacities.split(',').map(Number);
const modes = values.modes.split(',');
const results = [];
for (const capacity of capacities) for (const mode of modes) results.push(await cell(mode, capacity));
const suffix = Number(values.sglang) > 0 ? `-sglang${values.sglang}` : '';
writeFileSync(join(out, `results-${values.dispatch}${suffix}.json`), `${JSON.stringify(results, null, 2)}\n`);

const pct = (/** @type {number | undefined} */ x) => (x === undefined || x === null ? '–' : `${(100 * x).toFixed(1)}%`);
const lines = [
  '| KV capacity | evicted blocks | index mode | requests | exact | mean abs. error (tokens) | over / under | APC lost to wrong predictions | APC | TTFT p90 (s) |',
  '| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
];
for (const r of results) {
  const p = r.prediction ?? {};
  lines.push(
    `| ${r.capacity}× | ${r.evicted_blocks} | ${r.mode} | ${r.requests} | ${pct(p.exact_fraction)} | ${p.mae_tokens?.toFixed(0) ?? '–'} | ${p.over?.requests ?? '–'} / ${p.under?.requests ?? '–'} | ${pct(p.lost_apc)} | ${pct(r.apc)} | ${r.ttft_p90?.toFixed(2) ?? '–'} |`,
  );
}
process.stdout.write(`${lines.join('\n')}\n`);
