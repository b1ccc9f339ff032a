// @ts-check
// Issue #29's import-cost workload: its info lines among the target checks and its section of
// bench/RESULTS.md.

/** @typedef {import('../import-cost.mjs').ImportCostResult & { date?: string }} ImportCostResult */

/** @param {readonly object[]} results */
const imports = (results) =>
  /** @type {ImportCostResult[]} */ (results.filter((r) => 'kind' in r && r.kind === 'import-cost'));

/** @param {readonly object[]} allResults */
export function importCostChecks(allResults) {
  const rows = imports(allResults).filter((r) => r.leg.startsWith('import'));
  if (rows.length === 0) return [];
  const legs = rows.map((r) => `${r.build} ${r.import_ms.toFixed(0)} ms, ${r.rss_mib.toFixed(0)} MiB`);
  return [`  info  import { Router } from 'kvroute', median: ${legs.join('; ')}`];
}

/** @param {readonly object[]} allResults */
export function renderImportCostResults(allResults) {
  const rows = imports(allResults);
  if (rows.length === 0) return [];
  const out = ["## import-cost: what `import { Router } from 'kvroute'` loads (issue #29)", ''];
  out.push(
    "Each leg a fresh `node` process importing the package by its name from its root: `import` ms is from before the `import()` to after it (with `+ new Router().route()`, to after a two-instance router's first route, the addon loaded); RSS is the process's after it; wall is the whole process. The floor imports nothing. A build other than `this` is another checkout timed in the same run (`KVROUTE_BENCH_IMPORT_BASELINE`), e.g. main before the subpath exports, when `kvroute` loaded the proxy, uWebSockets.js, undici and prom-client. Medians. [bench/import-cost.mjs](import-cost.mjs).",
    '',
  );
  out.push(
    '| build | leg | import ms | RSS MiB | wall ms | runs | machine | date |',
    '|---|---|---:|---:|---:|---:|---|---|',
  );
  for (const r of rows)
    out.push(
      `| ${r.build} | \`${r.leg}\` | ${r.import_ms.toFixed(1)} | ${r.rss_mib.toFixed(1)} | ${r.wall_ms.toFixed(1)} | ${r.runs} | ${r.machine} | ${r.date ?? ''} |`,
    );
  out.push('');
  return out;
}
