// @ts-check
// Issue #14's cli-startup workload: its info lines among the target checks and its section of
// bench/RESULTS.md.

/** @typedef {import('../cli-startup.mjs').CliStartupResult & { date?: string }} CliStartupResult */

/** @param {readonly object[]} results */
const startups = (results) =>
  /** @type {CliStartupResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'cli-startup'));

/** @param {readonly object[]} allResults */
export function cliStartupChecks(allResults) {
  const rows = startups(allResults);
  const floor = rows.find((r) => r.build === 'node');
  if (!floor) return [];
  const legs = rows
    .filter((r) => r.build !== 'node')
    .map(
      (r) =>
        `${r.build === 'this' ? '' : `${r.build} `}${r.command} ${r.median_ms.toFixed(0)} ms (${r.floor_ratio.toFixed(2)}x)`,
    );
  return [`  info  cold start, median: node -e 0 ${floor.median_ms.toFixed(0)} ms; ${legs.join(', ')}`];
}

/** @param {readonly object[]} allResults */
export function renderCliStartupResults(allResults) {
  const rows = startups(allResults);
  if (rows.length === 0) return [];
  const out = ['## cli-startup: how long `kvroute` takes to start (issue #14)', ''];
  out.push(
    'Wall time of `spawnSync` of a fresh `node` process, the commands interleaved in rotating order; the floor is `node -e 0`. `kvroute hash` hashes `hi` from stdin. A build other than `this` is an older dist/ timed in the same run (`KVROUTE_BENCH_CLI_BASELINE`). [bench/cli-startup.mjs](cli-startup.mjs).',
    '',
  );
  out.push('| build | command | median ms | p90 ms | × floor | runs | date |', '|---|---|---:|---:|---:|---:|---|');
  for (const r of rows)
    out.push(
      `| ${r.build} | \`${r.command}\` | ${r.median_ms.toFixed(1)} | ${r.p90_ms.toFixed(1)} | ${r.floor_ratio.toFixed(2)} | ${r.runs} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
