// @ts-check
/**
 * The soak's verdict, its markdown table and its JSON report.
 *
 * Failed requests are tied to the fault windows they overlap (a window is the fault's [start, end]
 * plus ATTRIBUTION_GRACE_MS: a backend takes a moment to be noticed out). The soak fails on:
 * - any lost request (no answer at all; outcomes.mjs);
 * - any failed request that overlaps no fault window (unexplained);
 * - the proxy exiting before the soak stops it, or not exiting 0 on SIGTERM (a crash);
 * - an RSS leak, judged on the lower envelope (the lowest RSS of a stretch of samples, so V8's
 *   sawtooth of heap growth and major collections does not read as one): the end (the last third
 *   of the load and the settled sample) above the start (the load's first third, after warm-up) by
 *   more than `rssSlackMiB`;
 * - a rise over the load's last half (its last third's lowest against its first third's,
 *   lastHalfRise) of the memory outside V8's heaps above `rssRiseMiB`, or of the V8 heaps in use
 *   (every thread's, summed) above `heapRiseMiB`. Outside V8's heaps is RSS less every thread's V8
 *   heap as committed (which V8 grows and gives back by tens of MiB as it sizes a heap: a CI run read a
 *   33.6 MiB rise of plain RSS that was V8's heap shrinking early in the stretch and regrowing) and
 *   less the router's native index (which grows with the distinct prompts up to the engines' KV
 *   capacity, and is no leak). A leak in JavaScript shows in the heap in use, one in native code in
 *   the rest;
 * - a descriptor leak: file descriptors (or sockets) at the end above those before the load by
 *   more than `fdSlack`, once idle keep-alive connections had time to close;
 * - a fault kind never injected, or one the proxy did not survive (faults.mjs says what that means).
 */
import { FAULT_KINDS } from './faults.mjs';

export const ATTRIBUTION_GRACE_MS = 5_000;

/** @typedef {{ rssMiB: number, indexMiB: number, heapsUsedMiB: number, heapsTotalMiB: number }} MemorySample */

/**
 * `key` of every sample, a sample whose gauge could not be read (NaN: /metrics or /admin/state
 * unanswered during a fault) counting the last one read before it, or the first one read after
 * it when none was read before.
 * @param {MemorySample[]} stretch
 * @param {'indexMiB' | 'heapsUsedMiB' | 'heapsTotalMiB'} key
 */
function carried(stretch, key) {
  let last = stretch.map((s) => s[key]).find(Number.isFinite) ?? 0;
  return stretch.map((s) => {
    if (Number.isFinite(s[key])) last = s[key];
    return last;
  });
}

/**
 * The lowest of the last third against the lowest of the first third (lower envelopes: a
 * sawtooth is no trend).
 * @param {number[]} values
 */
function envelopeRise(values) {
  const third = Math.max(1, Math.floor(values.length / 3));
  return Math.min(...values.slice(-third)) - Math.min(...values.slice(0, third));
}

/**
 * The rise over `stretch` (the load's last half) of the memory outside V8's heaps (RSS less every
 * thread's committed V8 heap, less the router's native index) and of every thread's V8
 * heap in use, each its last third's lowest against its first third's. 0 with fewer than three
 * samples.
 * @param {MemorySample[]} stretch
 */
export function lastHalfRise(stretch) {
  if (stretch.length < 3) return { outsideHeapMiB: 0, heapMiB: 0 };
  const index = carried(stretch, 'indexMiB');
  const heapTotal = carried(stretch, 'heapsTotalMiB');
  const heapUsed = carried(stretch, 'heapsUsedMiB');
  return {
    outsideHeapMiB: envelopeRise(stretch.map((s, i) => s.rssMiB - (heapTotal[i] ?? 0) - (index[i] ?? 0))),
    heapMiB: envelopeRise(heapUsed),
  };
}

/** @param {number[]} values */
function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? NaN : /** @type {number} */ (sorted[Math.floor(sorted.length / 2)]);
}

/**
 * @param {{ outcomes: import('./outcomes.mjs').Outcomes, injected: { kind: string, start: number, end: number, survived: boolean, detail: string }[],
 *   samples: import('./monitor.mjs').Monitor['samples'], proxy: { crashed: string | null, exitCode: number | null },
 *   kv: Record<string, number>, limits: { rssSlackMiB: number, rssRiseMiB: number, heapRiseMiB: number, fdSlack: number }, settings: Record<string, unknown> }} run
 */
export function buildReport(run) {
  const { outcomes, injected, samples, limits } = run;
  /** @type {Record<string, number>} */
  const failedBy = {};
  /** @type {Record<string, number>} */
  const failedByFault = {};
  let unexplained = 0;
  for (const f of outcomes.failures) {
    failedBy[f.cause] = (failedBy[f.cause] ?? 0) + 1;
    const window = injected.find((w) => f.at <= w.end + ATTRIBUTION_GRACE_MS && f.end >= w.start);
    if (window === undefined) unexplained++;
    const key = window === undefined ? 'none (unexplained)' : window.kind;
    failedByFault[key] = (failedByFault[key] ?? 0) + 1;
  }
  /** @type {Record<string, number>} */
  const lostBy = {};
  for (const l of outcomes.lost) lostBy[l.cause] = (lostBy[l.cause] ?? 0) + 1;

  const start = samples.find((s) => s.phase === 'start');
  const load = samples.filter((s) => s.phase === 'load');
  const settled = samples.filter((s) => s.phase === 'settled').at(-1);
  // Memory: V8 grows its heaps in a sawtooth (the RSS of the 2-minute run swung by 60 MiB as major
  // collections came), so a leak is judged on the lower envelope: the lowest RSS of each stretch.
  const rss = (/** @type {typeof samples} */ of) => Math.min(...of.map((s) => s.rssMiB));
  const third = Math.max(1, Math.floor(load.length / 3));
  const rssStart = rss(load.slice(0, third));
  const rssPeak = Math.max(...samples.map((s) => s.rssMiB));
  const rssEnd = settled === undefined ? NaN : rss([...load.slice(-third), settled]);
  const rise = lastHalfRise(load.slice(Math.floor(load.length / 2)));
  const heap = load.map((s) => s.heapMiB).filter(Number.isFinite);
  const loopP99 = load.map((s) => s.loopP99Ms).filter(Number.isFinite);

  const byKind = Object.fromEntries(
    FAULT_KINDS.map((kind) => {
      const of = injected.filter((i) => i.kind === kind);
      return [kind, { injected: of.length, survived: of.filter((i) => i.survived).length }];
    }),
  );
  const reasons = [];
  if (outcomes.lost.length > 0) reasons.push(`${outcomes.lost.length} request(s) lost without an answer`);
  if (unexplained > 0) reasons.push(`${unexplained} failed request(s) overlap no injected fault`);
  if (run.proxy.crashed !== null) reasons.push(`the proxy crashed: ${run.proxy.crashed}`);
  else if (run.proxy.exitCode !== 0) reasons.push(`the proxy exited ${run.proxy.exitCode} on SIGTERM`);
  if (!(rssEnd <= rssStart + limits.rssSlackMiB))
    reasons.push(
      `RSS end ${rssEnd.toFixed(1)} MiB > start ${rssStart.toFixed(1)} + ${limits.rssSlackMiB} MiB (lowest of each)`,
    );
  if (rise.outsideHeapMiB > limits.rssRiseMiB)
    reasons.push(
      `RSS less the V8 heaps and the router's index rose ${rise.outsideHeapMiB.toFixed(1)} MiB over the load's last half (bound ${limits.rssRiseMiB} MiB, lowest to lowest)`,
    );
  if (rise.heapMiB > limits.heapRiseMiB)
    reasons.push(
      `the V8 heaps in use rose ${rise.heapMiB.toFixed(1)} MiB over the load's last half (bound ${limits.heapRiseMiB} MiB, lowest to lowest)`,
    );
  if (start === undefined || settled === undefined) reasons.push('no descriptor samples before and after the load');
  else {
    if (settled.fds > start.fds + limits.fdSlack)
      reasons.push(`file descriptors ${start.fds} -> ${settled.fds} (slack ${limits.fdSlack})`);
    if (settled.sockets > start.sockets + limits.fdSlack)
      reasons.push(`sockets ${start.sockets} -> ${settled.sockets} (slack ${limits.fdSlack})`);
  }
  for (const [kind, k] of Object.entries(byKind)) {
    if (k.injected === 0) reasons.push(`fault ${kind} never injected`);
    else if (k.survived < k.injected)
      reasons.push(`fault ${kind}: ${k.injected - k.survived} of ${k.injected} not survived`);
  }
  const p = outcomes.prediction;
  return {
    passed: reasons.length === 0,
    reasons,
    settings: run.settings,
    requests: {
      sent: outcomes.sent,
      completed: outcomes.completed,
      streamed: outcomes.streamed,
      failed: outcomes.failures.length,
      failedBy,
      failedByFault,
      unexplained,
      rejectedAsExpected: outcomes.rejected,
      rejectedBy: outcomes.rejectedBy,
      clientAborted: outcomes.aborted,
      lost: outcomes.lost.length,
      lostBy,
    },
    memory: {
      rssStartMiB: rssStart,
      rssPeakMiB: rssPeak,
      rssEndMiB: rssEnd,
      outsideHeapRiseLastHalfMiB: rise.outsideHeapMiB,
      heapRiseLastHalfMiB: rise.heapMiB,
      heapMedianMiB: median(heap),
      routerIndexStartMiB: load[0]?.indexMiB ?? NaN,
      routerIndexEndMiB: settled?.indexMiB ?? NaN,
      routerIndexEndBlocks: settled?.indexBlocks ?? NaN,
      heapMaxMiB: Math.max(...heap),
    },
    descriptors: {
      fdStart: start?.fds,
      fdEnd: settled?.fds,
      socketsStart: start?.sockets,
      socketsEnd: settled?.sockets,
    },
    eventLoop: { p99MedianMs: median(loopP99), p99MaxMs: Math.max(...loopP99) },
    prediction: {
      ...p,
      meanAbsError: p.requests === 0 ? NaN : p.absError / p.requests,
      exactShare: p.requests === 0 ? NaN : p.exact / p.requests,
    },
    kvEvents: run.kv,
    proxy: run.proxy,
    faults: byKind,
    injected,
    samples,
  };
}

/** @param {number | undefined} x @param {number} [digits] */
const fmt = (x, digits = 1) => (x === undefined || !Number.isFinite(x) ? 'n/a' : x.toFixed(digits));

/**
 * The markdown table (and the fault table) of a report.
 * @param {ReturnType<typeof buildReport>} r
 */
export function reportTable(r) {
  const q = r.requests;
  const causes = (/** @type {Record<string, number>} */ o) =>
    Object.entries(o)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${v} ${k}`)
      .join('; ') || 'none';
  const rows = [
    ['requests sent', String(q.sent)],
    ['completed', `${q.completed} (${q.streamed} streamed)`],
    ['failed, by cause', `${q.failed}: ${causes(q.failedBy)}`],
    ['failed, by fault', causes(q.failedByFault)],
    ['unexplained failures', String(q.unexplained)],
    ['bad requests rejected as they should be', `${q.rejectedAsExpected}: ${causes(q.rejectedBy)}`],
    ['aborted by the client', String(q.clientAborted)],
    ['lost (no answer)', `${q.lost}${q.lost > 0 ? `: ${causes(q.lostBy)}` : ''}`],
    [
      'RSS start / peak / end (MiB)',
      `${fmt(r.memory.rssStartMiB)} / ${fmt(r.memory.rssPeakMiB)} / ${fmt(r.memory.rssEndMiB)}`,
    ],
    [
      "rise over the load's last half of RSS less the V8 heaps and the router's index / of the V8 heaps in use (MiB, lowest to lowest)",
      `${fmt(r.memory.outsideHeapRiseLastHalfMiB)} / ${fmt(r.memory.heapRiseLastHalfMiB)}`,
    ],
    ['main-thread V8 heap median / max (MiB)', `${fmt(r.memory.heapMedianMiB)} / ${fmt(r.memory.heapMaxMiB)}`],
    [
      "router's native index, load start / end (MiB)",
      `${fmt(r.memory.routerIndexStartMiB)} / ${fmt(r.memory.routerIndexEndMiB)} (${r.memory.routerIndexEndBlocks} blocks at the end)`,
    ],
    ['file descriptors start / end', `${r.descriptors.fdStart} / ${r.descriptors.fdEnd}`],
    ['sockets start / end', `${r.descriptors.socketsStart} / ${r.descriptors.socketsEnd}`],
    [
      'event-loop delay p99, median / max of samples (ms)',
      `${fmt(r.eventLoop.p99MedianMs)} / ${fmt(r.eventLoop.p99MaxMs)}`,
    ],
    [
      'predicted vs engine cached tokens',
      `${r.prediction.predicted} vs ${r.prediction.engine} over ${r.prediction.requests} requests; exact ${fmt(r.prediction.exactShare * 100)}%, mean abs error ${fmt(r.prediction.meanAbsError)} tokens`,
    ],
    [
      'KV events: gaps / replays / replay failures / rebuilds',
      `${r.kvEvents.gaps} / ${r.kvEvents.replays} / ${r.kvEvents.replayFailures} / ${r.kvEvents.rebuilds}`,
    ],
    ['proxy', r.proxy.crashed ?? `alive to the end; exit ${r.proxy.exitCode} on SIGTERM`],
  ];
  const lines = ['| measure | value |', '| --- | --- |', ...rows.map(([a, b]) => `| ${a} | ${b} |`)];
  lines.push('', '| fault | injected | survived |', '| --- | ---: | ---: |');
  for (const [kind, k] of Object.entries(r.faults)) lines.push(`| ${kind} | ${k.injected} | ${k.survived} |`);
  lines.push('', r.passed ? '**PASS**' : `**FAIL**: ${r.reasons.join('; ')}`);
  return lines.join('\n');
}
