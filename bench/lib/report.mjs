// @ts-check
// Turns benchmark results into the target checks of issue #2 and the
// markdown of bench/RESULTS.md.
import { analyzeRunChecks, renderAnalyzeRunResults } from './analyze-run-report.mjs';
import { bodiesTargetChecks, renderBodiesResults } from './bodies-report.mjs';
import { cliStartupChecks, renderCliStartupResults } from './cli-startup-report.mjs';
import { importCostChecks, renderImportCostResults } from './import-cost-report.mjs';
import { kvEventsChecks, renderKvEventsResults } from './kv-events-report.mjs';
import { eventRelayChecks, renderEventRelayResults } from './event-relay-report.mjs';
import { renderTracingResults, tracingChecks } from './tracing-report.mjs';
import { flowChecks, renderFlowResults } from './flow-report.mjs';
import { flowTargetChecks, renderFlowTargetResults } from './flow-targets-report.mjs';
import { renderThreadsResults, threadsTargetChecks } from './threads-report.mjs';
import { proxyTargetChecks, renderProxyResults } from './proxy-report.mjs';
import { renderReplayDriverResults, replayDriverChecks } from './replay-driver-report.mjs';
import { renderTokenizeResults, tokenizeChecks } from './tokenize-report.mjs';

/**
 * @typedef {import('./workload.mjs').Result} Result
 * @typedef {import('../characterize.mjs').AnalysisResult} AnalysisResult
 * @typedef {import('../simulate.mjs').SimulationResult} SimulationResult
 * @typedef {import('../sweep.mjs').SweepResult} SweepResult
 * @typedef {import('../feed.mjs').FeedResult} FeedResult
 * @typedef {import('./proxy-report.mjs').ProxyResult} ProxyResult
 * @typedef {import('./bodies-report.mjs').BodySizeResult} BodySizeResult
 * @typedef {import('./bodies-report.mjs').BodiesResult} BodiesResult
 * @typedef {import('../cli-startup.mjs').CliStartupResult} CliStartupResult
 * @typedef {import('../analyze-run.mjs').RunAnalysisResult} RunAnalysisResult
 * @typedef {import('../replay-driver.js').ReplayDriverResult} ReplayDriverResult
 * @typedef {import('../tokenize.mjs').TokenizeLibraryResult | import('../tokenize.mjs').TokenizeSessionResult} TokenizeResult
 * @typedef {import('../kv-events.mjs').KvEventsResult} KvEventsResult
 * @typedef {import('../import-cost.mjs').ImportCostResult} ImportCostResult
 * @typedef {(Result | AnalysisResult | SimulationResult | SweepResult | FeedResult | ProxyResult | BodySizeResult | BodiesResult | CliStartupResult | RunAnalysisResult | ReplayDriverResult | TokenizeResult | KvEventsResult | import('../event-relay.mjs').EventRelayResult | import('../tracing.js').TracingResult | ImportCostResult) & { date?: string; measured_on?: string }} AnyResult
 * @typedef {{ machine: ReturnType<typeof import('./machine.mjs').machineInfo>, quick: boolean, timer_overhead_us: number, results: AnyResult[] }} BenchDocument
 */

/** @param {AnyResult[]} results @returns {Result[]} */
const routingOnly = (results) => /** @type {Result[]} */ (results.filter((r) => !('kind' in r)));

/** @param {AnyResult[]} results @returns {AnalysisResult[]} */
const analysisOnly = (results) =>
  /** @type {AnalysisResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'analysis'));

/** Results recorded before the addon's trie existed have no `trie`: they walked the TypeScript one. */
const trieOf = (/** @type {AnalysisResult} */ a) => a.trie ?? 'typescript';

/** @param {AnyResult[]} results @returns {FeedResult[]} */
const feedOnly = (results) => /** @type {FeedResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'feed'));

/** @param {AnyResult[]} results @returns {SimulationResult[]} */
const simulationOnly = (results) =>
  /** @type {SimulationResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'simulation'));

/** @param {AnyResult[]} results @returns {SweepResult[]} */
const sweepOnly = (results) => /** @type {SweepResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'sweep'));

const MIB = 2 ** 20;

/** @param {Result[]} results */
function pairs(results) {
  /** @type {Map<string, { native?: Result, ts?: Result }>} */
  const byKey = new Map();
  for (const r of results) {
    const key = `${r.workload}|${r.instances}|${r.policy}`;
    const entry = byKey.get(key) ?? {};
    entry[r.impl] = r;
    byKey.set(key, entry);
  }
  return [...byKey.values()];
}

/** @param {number} x */
const f = (x) => (x < 10 ? x.toFixed(2) : x < 100 ? x.toFixed(1) : x.toFixed(0));

const OFFLOAD_SUFFIX = '+offload';
/** @param {Result} r */
const isOffload = (r) => r.policy.endsWith(OFFLOAD_SUFFIX);

/**
 * The offload layer's cost, one line per native `+offload` row: its p50 beside its base's, and
 * the share of decisions it offloaded (each of which commits the request's blocks twice).
 * @param {Result[]} results
 */
function offloadLines(results) {
  const native = results.filter((r) => r.impl === 'native');
  return native.filter(isOffload).flatMap((r) => {
    const base = native.find(
      (b) =>
        b.workload === r.workload &&
        b.instances === r.instances &&
        b.policy === r.policy.slice(0, -OFFLOAD_SUFFIX.length),
    );
    if (base === undefined) return [];
    const delta = r.p50_us - base.p50_us;
    const share = r.offloaded_share === undefined ? '' : `, ${(r.offloaded_share * 100).toFixed(1)}% offloaded`;
    return [
      `offload layer, ${r.workload} ${r.instances} inst: ${r.policy} native p50 ${f(r.p50_us)} µs vs ${base.policy} ${f(base.p50_us)} µs (${delta >= 0 ? '+' : ''}${delta.toFixed(2)} µs${share})`,
    ];
  });
}

/**
 * One line per target: the worst case over policies, and whether it holds.
 * @param {AnyResult[]} allResults
 */
export function targetChecks(allResults) {
  const results = routingOnly(allResults);
  const lines = ['targets (worst policy shown):'];
  /** @param {string} label @param {number | undefined} value @param {(v: number) => boolean} ok @param {string} unit */
  const check = (label, value, ok, unit) => {
    if (value === undefined) return;
    lines.push(`  ${ok(value) ? 'MET ' : 'MISS'}  ${label}: ${f(value)}${unit}`);
  };
  // The targets are the base policies' (issue #2); the offload layer is reported beside its base.
  const native = results.filter((r) => r.impl === 'native' && !isOffload(r));
  const worst = (/** @type {Result[]} */ rs, /** @type {(r: Result) => number} */ key) =>
    rs.length === 0 ? undefined : Math.max(...rs.map(key));
  const cacheAware = (/** @type {Result} */ r) => !['round_robin', 'load_only'].includes(r.policy);
  const a = native.filter((r) => r.workload === 'mooncake');
  const b8 = native.filter((r) => r.workload === 'agentic-long' && r.instances === 8);
  check(
    '(a) mooncake native p50 <= 1 µs, all policies',
    worst(a, (r) => r.p50_us),
    (v) => v <= 1,
    ' µs',
  );
  check(
    '(b) agentic-long 8 inst native p50 <= 5 µs, cache-aware policies',
    worst(b8.filter(cacheAware), (r) => r.p50_us),
    (v) => v <= 5,
    ' µs',
  );
  check(
    '(b) agentic-long 8 inst native p50, round_robin/load_only (informational)',
    worst(
      b8.filter((r) => !cacheAware(r)),
      (r) => r.p50_us,
    ),
    () => true,
    ' µs',
  );
  const ratios = (/** @type {string} */ workload) =>
    pairs(results)
      .filter((p) => p.native && p.ts && p.native.workload === workload && !isOffload(p.native))
      .map((p) => /** @type {Result} */ (p.ts).p50_us / /** @type {Result} */ (p.native).p50_us);
  for (const workload of ['mooncake', 'agentic-long']) {
    const rs = ratios(workload).sort((a, b) => a - b);
    if (rs.length === 0) continue;
    check(`native >= 10x the reference on ${workload} (p50 ratio, lowest policy)`, rs[0] ?? 0, (v) => v >= 10, 'x');
    lines.push(
      `        median over policies ${f(rs[Math.floor(rs.length / 2)] ?? 0)}x, highest ${f(rs[rs.length - 1] ?? 0)}x`,
    );
  }
  lines.push(...offloadLines(results).map((line) => `  info  ${line}`));
  check(
    'bytes per indexed block <= 64 (native, highest)',
    worst(native, (r) => r.bytes_per_block),
    (v) => v <= 64,
    ' B',
  );
  const characterizations = analysisOnly(allResults);
  for (const a of characterizations.filter((r) => r.workers !== 0)) {
    const size = `${(a.requests / 1e6).toFixed(2)}M requests, ${a.workers} worker${a.workers === 1 ? '' : 's'}`;
    if (trieOf(a) !== 'native') {
      const twin = characterizations.find((n) => n.workers === a.workers && trieOf(n) === 'native');
      lines.push(
        `  info  characterize ${size}, TypeScript trie (reference): ${f(a.seconds)} s, peak RSS ${(a.peak_rss_bytes / MIB).toFixed(0)} MiB` +
          (twin === undefined
            ? ''
            : ` (the addon's trie: ${f(twin.seconds)} s, ${(twin.peak_rss_bytes / MIB).toFixed(0)} MiB)`),
      );
      continue;
    }
    check(`characterize ${size}: <= 60 s`, a.seconds, (v) => v <= 60, ' s');
    check(`characterize ${size}: peak RSS <= 2 GiB`, a.peak_rss_bytes / MIB, (v) => v <= 2048, ' MiB');
  }
  // Results recorded before the 100k trace existed have no `trace` field: they are the default.
  const simulations = simulationOnly(allResults).filter((s) => (s.trace ?? 'default') === 'default');
  if (simulations.length > 0)
    check(
      `sim run, default trace, 8 instances <= 2 s (slowest of ${simulations.length} runs)`,
      Math.max(...simulations.map((s) => s.seconds)),
      (v) => v <= 2,
      ' s',
    );
  for (const s of sweepOnly(allResults))
    check(`sweep, default (${s.cells} cells, default trace) <= 30 s wall`, s.seconds, (v) => v <= 30, ' s');
  const feeds = feedOnly(allResults);
  if (feeds.length > 0)
    check(
      `the shm feed adds <= 100 ns per decision at 8 instances (highest of ${feeds.length} policies)`,
      Math.max(...feeds.map((r) => r.overhead_ns)),
      (v) => v <= 100,
      ' ns',
    );
  for (const s of simulationOnly(allResults).filter((r) => r.trace === '100k'))
    check(
      `sim run, ${s.requests.toLocaleString('en-US')}-request trace, 8 instances <= 60 s`,
      s.seconds,
      (v) => v <= 60,
      ' s',
    );
  lines.push(
    ...proxyTargetChecks(allResults),
    ...bodiesTargetChecks(allResults),
    ...cliStartupChecks(allResults),
    ...importCostChecks(allResults),
    ...analyzeRunChecks(allResults),
    ...replayDriverChecks(allResults),
    ...tokenizeChecks(allResults),
    ...kvEventsChecks(allResults),
    ...eventRelayChecks(allResults),
    ...tracingChecks(allResults),
    ...flowChecks(allResults),
    ...flowTargetChecks(allResults),
    ...threadsTargetChecks(allResults),
  );
  return lines;
}

/**
 * "mooncake, agentic-long on 2026-11-29; simulate on 2026-11-30": each workload's run date.
 * @param {BenchDocument} doc
 */
function runDates(doc) {
  /** @type {Map<string, Set<string>>} */
  const byDate = new Map();
  for (const r of doc.results) {
    const date = r.date ?? doc.machine.date;
    byDate.set(date, (byDate.get(date) ?? new Set()).add(r.workload));
  }
  return [...byDate]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([date, workloads]) => `${[...workloads].join(', ')} on ${date}`)
    .join('; ');
}

/**
 * "AMD EPYC, 2 cores, 24 GiB, Linux … x64": a machine as RESULTS.md names it.
 * @param {BenchDocument['machine']} m
 */
export const machineLine = (m) => `${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.os}`;

/**
 * The machine a document's figures were measured on, or, when a refresh of some workloads ran on
 * another machine than the rest (results carry their own `measured_on` then), each machine with its
 * workloads: a figure is never credited to a machine it did not run on.
 * @param {BenchDocument} doc
 */
function machinesLine(doc) {
  /** @type {Map<string, Set<string>>} */
  const byMachine = new Map();
  for (const r of doc.results) {
    const machine = r.measured_on ?? machineLine(doc.machine);
    byMachine.set(machine, (byMachine.get(machine) ?? new Set()).add(r.workload));
  }
  if (byMachine.size <= 1) return `- Machine: ${[...byMachine.keys()][0] ?? machineLine(doc.machine)}`;
  return `- Machines: ${[...byMachine].map(([machine, workloads]) => `${machine} (${[...workloads].join(', ')})`).join('; ')}`;
}

/**
 * @param {BenchDocument} doc
 * @param {string} command
 */
export function renderResults(doc, command) {
  const m = doc.machine;
  const out = [
    '# Benchmark results',
    '',
    `Recorded with \`${command}\` (one workload refreshes with \`-- --only NAME --update-results\`): ${runDates(doc)}.`,
    '',
    machinesLine(doc),
    `- Node ${m.node}; native addon ${m.native ? 'on' : 'OFF'}`,
    `- Timer: ${(doc.timer_overhead_us * 1000).toFixed(0)} ns per performance.now() pair in the ${doc.machine.date} run, measured at its start and subtracted from every sample of both implementations`,
    '',
    'Each figure times one `route()` plus one `complete()` (of the oldest request in flight) through the',
    'public `Router`, on a replay that keeps requests in flight so load-aware policies see moving load.',
    'Native and TypeScript reference run side by side in the same process; every workload runs in a',
    'fresh process. The machine is shared: figures move by ±10% between runs. Workloads, capacities and',
    'method: [bench/README.md](README.md).',
    '',
    '## Targets',
    '',
    '```',
    ...targetChecks(doc.results),
    '```',
    '',
  ];
  const routing = routingOnly(doc.results);
  for (const workload of [...new Set(routing.map((r) => r.workload))]) {
    for (const instances of [...new Set(routing.filter((r) => r.workload === workload).map((r) => r.instances))]) {
      const rows = pairs(routing).filter(
        (p) => (p.native ?? p.ts)?.workload === workload && (p.native ?? p.ts)?.instances === instances,
      );
      const sample = /** @type {Result} */ (rows[0]?.native ?? rows[0]?.ts);
      out.push(`## ${workload}, ${instances} instances`, '');
      out.push(
        `${sample.indexed_blocks.toLocaleString('en-US')} blocks indexed when timing starts; about ${sample.mean_ids.toLocaleString('en-US')} ids per request.`,
        '',
      );
      out.push(
        '| policy | native p50 µs | native p99 µs | native decisions/s | reference p50 µs | reference p99 µs | p50 ratio | native B/block | reference B/block |',
      );
      out.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|');
      for (const { native, ts } of rows) {
        const policy = (native ?? ts)?.policy;
        const cell = (/** @type {Result | undefined} */ r, /** @type {(r: Result) => string} */ pick) =>
          r ? pick(r) : '–';
        out.push(
          `| ${policy} | ${cell(native, (r) => f(r.p50_us))} | ${cell(native, (r) => f(r.p99_us))} | ${cell(native, (r) => r.ops_per_s.toLocaleString('en-US'))} | ` +
            `${cell(ts, (r) => f(r.p50_us))} | ${cell(ts, (r) => f(r.p99_us))} | ${native && ts ? `${f(ts.p50_us / native.p50_us)}x` : '–'} | ` +
            `${cell(native, (r) => f(r.bytes_per_block))} | ${cell(ts, (r) => f(r.bytes_per_block))} |`,
        );
      }
      out.push('');
      const here = routing.filter((r) => r.workload === workload && r.instances === instances);
      const loads = here.map((r) => r.load_average).filter((x) => x !== undefined);
      const layer = offloadLines(here);
      if (layer.length > 0) {
        out.push(
          '`+offload` rows run the offload layer over their base; an offloaded request commits its blocks on the ' +
            'prefill instance too and opens a second ticket (completed inside the timed pair):',
          '',
          ...layer.map((line) => `- ${line}`),
          '',
        );
      }
      if (loads.length > 0)
        out.push(
          `Load average (1 min) during the run: ${Math.min(...loads)}–${Math.max(...loads)} on ${doc.machine.cores} cores.`,
          '',
        );
    }
  }
  const analysis = analysisOnly(doc.results);
  if (analysis.length > 0) {
    const first = /** @type {AnalysisResult} */ (analysis[0]);
    out.push('## characterize: `kvroute analyze trace` on a generated trace', '');
    out.push(
      `\`kvroute trace synth --block-size 512\` at ${first.requests.toLocaleString('en-US')} requests, ` +
        `${first.blocks.toLocaleString('en-US')} blocks, ${(first.file_bytes / MIB).toFixed(0)} MiB of JSONL ` +
        `(generated in ${first.generate_s.toFixed(1)} s). Wall time covers reading, parsing, validating and ` +
        "characterizing; peak RSS is the whole process, worker threads included. The trie stage walks the addon's " +
        'prefix trie, or the TypeScript one with `KVROUTE_NATIVE=0` (the reference).',
      '',
    );
    out.push('| `--workers` | threads | trie | seconds | requests/s | peak RSS MiB |', '|---|---|---|---:|---:|---:|');
    for (const a of analysis)
      out.push(
        `| ${a.workers} | ${a.workers === 0 ? 'one: reading, trie and shards in turn' : `reader + trie stage + ${a.workers} session shard${a.workers === 1 ? '' : 's'} (the default)`} | ${trieOf(a) === 'native' ? 'addon' : 'TypeScript'} | ${f(a.seconds)} | ${Math.round(a.requests / a.seconds).toLocaleString('en-US')} | ${(a.peak_rss_bytes / MIB).toFixed(0)} |`,
      );
    out.push('');
  }
  const simulations = simulationOnly(doc.results);
  if (simulations.length > 0) {
    out.push('## simulate: `kvroute sim run`, 8 instances', '');
    out.push(
      'Session-sequential dispatch, wall time of one run. `default` is the default synthetic trace; `100k` is the generator at `--scale 80 --duration 139200` (the default trace’s mean arrival rate), streamed.',
      '',
    );
    out.push(
      '| trace | requests | policy | engine state | engine steps | simulated s | wall s |',
      '|---|---:|---|---|---:|---:|---:|',
    );
    for (const s of simulations)
      out.push(
        `| ${s.trace ?? 'default'} | ${s.requests.toLocaleString('en-US')} | ${s.policy} | ${s.engine_state} | ${s.steps.toLocaleString('en-US')} | ${s.virtual_seconds.toFixed(0)} | ${f(s.seconds)} |`,
      );
    out.push('');
  }
  const sweeps = sweepOnly(doc.results);
  if (sweeps.length > 0) {
    out.push('## sweep: `kvroute sweep`, the default sweep on the default synthetic trace', '');
    out.push(
      'lmetric, load_only, sticky, unified, unified+A+B × shadow, shm in the simulator, 8 instances per cell, cells on Piscina workers; wall time of the CLI from start to sweep.json (trace characterization and the interference grid included).',
      '',
    );
    out.push('| cells | requests per cell | workers | wall s |', '|---:|---:|---:|---:|');
    for (const s of sweeps)
      out.push(`| ${s.cells} | ${s.requests.toLocaleString('en-US')} | ${s.workers} | ${f(s.seconds)} |`);
    out.push('');
  }
  const feeds = feedOnly(doc.results);
  if (feeds.length > 0) {
    out.push('## feed: the shared-memory engine-state feed in route(), 8 instances, native', '');
    out.push(
      'p50 of route() + complete() on the Mooncake trace with every instance holding a fresh feed snapshot (on) and without a feed (off), alternating repetitions. The slot read is one read of one slot from JavaScript, Node-API call included.',
      '',
    );
    out.push(
      '| policy | off p50 µs | on p50 µs | feed ns per decision | slot read ns (JS) |',
      '|---|---:|---:|---:|---:|',
    );
    for (const r of feeds)
      out.push(
        `| ${r.policy} | ${r.off_p50_us.toFixed(3)} | ${r.on_p50_us.toFixed(3)} | ${r.overhead_ns.toFixed(0)} | ${r.slot_read_ns.toFixed(0)} |`,
      );
    out.push('');
  }
  out.push(
    ...renderProxyResults(doc.results),
    ...renderBodiesResults(doc.results),
    ...renderCliStartupResults(doc.results),
    ...renderImportCostResults(doc.results),
    ...renderAnalyzeRunResults(doc.results),
    ...renderReplayDriverResults(doc.results),
    ...renderTokenizeResults(doc.results),
    ...renderKvEventsResults(doc.results),
    ...renderEventRelayResults(doc.results),
    ...renderTracingResults(doc.results),
    ...renderFlowResults(doc.results),
    ...renderFlowTargetResults(doc.results),
    ...renderThreadsResults(doc.results),
  );
  return out.join('\n');
}
