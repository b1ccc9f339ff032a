/**
 * The dashboard page's stylesheet, served as /dashboard/app.css. A string module so that `tsc`
 * ships it (it copies no other files); a separate file, not a <style> block, so the page runs
 * under a Content-Security-Policy without 'unsafe-inline'.
 */
export const PAGE_CSS = `
:root {
  --fg: #1d232b; --muted: #66707c; --line: #e2e6ea; --bg: #f5f7f9; --card: #fff;
  --accent: #2f6fde; --ok: #1f9d55; --bad: #d64545; --warn: #c98a00;
}
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; align-items: center; gap: 16px; padding: 12px 24px; background: var(--card); border-bottom: 1px solid var(--line); }
header h1 { font-size: 18px; margin: 0; }
.badge { color: var(--muted); }
.status { margin-left: auto; font-size: 12px; padding: 2px 10px; border-radius: 10px; background: var(--line); }
.status.live { background: #e3f5ea; color: var(--ok); }
.status.stale, .status.reconnecting { background: #fdecec; color: var(--bad); }
main { padding: 16px 24px; display: grid; gap: 16px; }
small { color: var(--muted); font-weight: normal; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px; }
.tile, .card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; }
.tile { padding: 10px 14px; }
.tile .label { color: var(--muted); font-size: 12px; }
.tile .value { font-size: 26px; font-variant-numeric: tabular-nums; }
.charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 16px; }
figure.card { margin: 0; padding: 10px 14px; min-width: 0; }
figcaption, .card h2 { font-size: 14px; font-weight: 600; margin: 0 0 6px; }
section.card { padding: 10px 14px; overflow-x: auto; }
.chart { width: 100%; min-height: 200px; position: relative; }
.chart-note { position: absolute; left: 70px; right: 10px; top: 80px; text-align: center; color: var(--muted); pointer-events: none; }
.chart-note:empty { display: none; }
.chart.waiting .u-legend { visibility: hidden; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
table.decisions { width: auto; min-width: 480px; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { color: var(--muted); font-weight: 500; font-size: 12px; }
.num, td.in-flight, td.requests, td.errors, td.count { text-align: right; }
table.tenants td:not(.tenant):not(.priority) { text-align: right; }
td.tenant { max-width: 280px; overflow: hidden; text-overflow: ellipsis; font-family: ui-monospace, monospace; font-size: 13px; }
tr[data-other="true"] td.tenant { font-family: inherit; font-style: italic; color: var(--muted); }
td.outcome.refused { color: var(--bad); }
td.id { max-width: 360px; overflow: hidden; text-overflow: ellipsis; font-family: ui-monospace, monospace; font-size: 13px; }
tr.empty td { color: var(--muted); }
.health.ok { color: var(--ok); } .health.bad { color: var(--bad); } .health.drained { color: var(--warn); }
.meter { display: inline-block; vertical-align: middle; width: 120px; height: 8px; border-radius: 4px; background: var(--line); overflow: hidden; margin-right: 8px; }
.meter > span { display: block; height: 100%; width: 0; background: var(--accent); transition: width .3s; }
.kv-usage .meter > span { background: var(--warn); }
.hit-rate .meter > span, .engine-hit-rate .meter > span { background: var(--ok); }
footer { padding: 4px 24px 24px; color: var(--muted); font-size: 12px; }
`;
