// @ts-check
// Issue #15's analyze-run workload: its target checks and its section of bench/RESULTS.md.

/** @typedef {import('../analyze-run.mjs').RunAnalysisResult & { date?: string }} RunAnalysisResult */

const MIB = 2 ** 20;

/** @param {readonly object[]} results */
const analyses = (results) =>
  /** @type {RunAnalysisResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'run-analysis'));

/** Results recorded before the addon's trie existed have no `trie`: they walked the TypeScript one. */
const trieOf = (/** @type {RunAnalysisResult} */ r) => r.trie ?? 'typescript';

const leg = (/** @type {RunAnalysisResult} */ r) =>
  r.reuse
    ? `with the reuse split, workers ${r.workers}${trieOf(r) === 'native' ? '' : ', TypeScript trie (reference)'}`
    : 'records only';

/** @param {readonly object[]} allResults */
export function analyzeRunChecks(allResults) {
  /** @type {string[]} */
  const lines = [];
  const rows = analyses(allResults);
  for (const r of rows) {
    const size = `${(r.records / 1e6).toFixed(2)}M records, ${leg(r)}`;
    if (r.reuse && trieOf(r) !== 'native') {
      const twin = rows.find((n) => n.reuse && n.workers === r.workers && trieOf(n) === 'native');
      const ratio =
        twin === undefined
          ? ''
          : ` (the addon's trie: ${twin.seconds.toFixed(1)} s, ${(twin.peak_rss_bytes / MIB).toFixed(0)} MiB)`;
      lines.push(
        `  info  analyze run ${size}: ${r.seconds.toFixed(1)} s, peak RSS ${(r.peak_rss_bytes / MIB).toFixed(0)} MiB${ratio}`,
      );
      continue;
    }
    const mark = (/** @type {boolean} */ ok) => (ok ? '  MET ' : '  MISS');
    lines.push(`${mark(r.seconds <= 20)}  analyze run ${size}: <= 20 s: ${r.seconds.toFixed(1)} s`);
    lines.push(
      `${mark(r.peak_rss_bytes <= 2048 * MIB)}  analyze run ${size}: peak RSS <= 2 GiB: ${(r.peak_rss_bytes / MIB).toFixed(0)} MiB`,
    );
  }
  return lines;
}

/** @param {readonly object[]} allResults */
export function renderAnalyzeRunResults(allResults) {
  const rows = analyses(allResults);
  if (rows.length === 0) return [];
  const first = /** @type {RunAnalysisResult} */ (rows[0]);
  const out = ['## analyze-run: `kvroute analyze run` on generated records (issue #15)', ''];
  out.push(
    `${first.records.toLocaleString('en-US')} records (${(first.file_bytes / MIB).toFixed(0)} MiB) generated from \`kvroute trace synth --block-size 512\`, 8 instances ([bench/analyze-run.mjs](analyze-run.mjs)). Wall time covers reading the records, the metrics, the slow-cause timelines and, with the reuse split, reading and walking the trace (through the addon's prefix trie, or the TypeScript one with \`KVROUTE_NATIVE=0\`: the reference); peak RSS is the whole process, worker threads included. Targets (the addon's legs): ≤ 20 s, ≤ 2 GiB.`,
    '',
  );
  out.push('| run | seconds | records/s | slow | peak RSS MiB | date |', '|---|---:|---:|---:|---:|---|');
  for (const r of rows)
    out.push(
      `| ${leg(r)} | ${r.seconds.toFixed(1)} | ${Math.round(r.records / r.seconds).toLocaleString('en-US')} | ${r.n_slow.toLocaleString('en-US')} | ${(r.peak_rss_bytes / MIB).toFixed(0)} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
