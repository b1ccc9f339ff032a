/**
 * The dashboard page's HTML: a static skeleton that the page script (page-script.ts) fills from
 * the SSE frames. No data is interpolated here, only the asset paths, which are constants, so
 * nothing from a request or a backend ever reaches this markup.
 *
 * Stable hooks (tests and users scrape these; keep them when restyling):
 * - `#requests-total`, `#request-rate`, `#ttft-p90`, `#hit-rate`, `#errors-total`, `#policy`,
 *   `#status`, and the offload tiles `#offloads`, `#offload-fallbacks`, `#prefill-p90`,
 *   `#transfer-p90`: text plus a raw `data-value`;
 * - `#instances tr[data-instance="<backend URL>"]` with cells `.in-flight`, `.kv-usage`,
 *   `.hit-rate`, `.engine-hit-rate`, `.requests`, `.errors`, `.health` (each with `data-value`);
 * - `#decisions tr[data-reason="<reason>"] .count`;
 * - `#tenants-panel[data-state]` (`live`: rows; `idle`: flow control on, nothing in the window;
 *   `off`: no --max-in-flight and no rate limit, nothing in the window), and
 *   `#tenants tr[data-tenant="<tenant>"][data-priority="<class>"]` (`data-other="true"` on the
 *   folded rows) with cells `.waiting`, `.wait-p90`, `td.outcome[data-outcome="<outcome>"]` (one
 *   per outcome the frame lists), `.tokens-in`, `.tokens-out`, `.rpm-left`, `.tpm-left` (each
 *   with `data-value`);
 * - `#chart-rate`, `#chart-ttft`: the uPlot charts.
 */

export interface PagePaths {
  uplotJs: string;
  uplotCss: string;
  localeGuard: string;
  script: string;
  css: string;
}

export function pageHtml(paths: PagePaths): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kvroute dashboard</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${paths.uplotCss}">
<link rel="stylesheet" href="${paths.css}">
<script src="${paths.localeGuard}" defer></script>
<script src="${paths.uplotJs}" defer></script>
<script src="${paths.script}" defer></script>
</head>
<body>
<header>
  <h1>kvroute</h1>
  <span class="badge">policy <b id="policy">–</b></span>
  <span id="status" class="status connecting" data-value="connecting">connecting…</span>
</header>
<main>
  <section class="tiles">
    <div class="tile"><div class="label">requests</div><div class="value" id="requests-total" data-value="">–</div></div>
    <div class="tile"><div class="label">request rate <small>req/s</small></div><div class="value" id="request-rate" data-value="">–</div></div>
    <div class="tile"><div class="label">TTFT p90 <small>ms</small></div><div class="value" id="ttft-p90" data-value="">–</div></div>
    <div class="tile"><div class="label">cache hit rate <small>cached / prompt tokens</small></div><div class="value" id="hit-rate" data-value="">–</div></div>
    <div class="tile"><div class="label">errors <small>status ≥ 400</small></div><div class="value" id="errors-total" data-value="">–</div></div>
  </section>
  <section class="charts">
    <figure class="card"><figcaption>Request rate <small>requests finished per second</small></figcaption><div id="chart-rate" class="chart"></div></figure>
    <figure class="card"><figcaption>TTFT p90 <small>ms, sliding window</small></figcaption><div id="chart-ttft" class="chart"></div></figure>
  </section>
  <section class="card">
    <h2>Instances</h2>
    <table class="instances">
      <thead><tr><th>instance</th><th title="the models it serves (from its /v1/models, or pinned); any: not known yet">models</th><th>health</th><th class="num">in flight</th><th>KV usage</th><th>cache hit rate</th><th title="the engine's own prefix-cache hit ratio, from its /metrics every reconcile round">engine hit rate</th><th class="num" title="the learned prefill speed (kvroute serve --costs) and the first tokens it rests on; 0 obs: the preset's prior">prefill speed</th><th class="num">requests</th><th class="num">errors</th></tr></thead>
      <tbody id="instances"><tr class="empty"><td colspan="7">waiting for the first frame…</td></tr></tbody>
    </table>
  </section>
  <section class="card" id="tenants-panel" data-state="waiting">
    <h2>Tenants <small id="tenants-note">flow control per tenant and priority class</small></h2>
    <table class="tenants">
      <thead><tr id="tenants-head"></tr></thead>
      <tbody id="tenants"><tr class="empty"><td>waiting for the first frame…</td></tr></tbody>
    </table>
  </section>
  <section class="card">
    <h2>Prefill offload <small>prefills run on a decode-free instance, their KV moved to the decoding one</small></h2>
    <div class="tiles">
      <div class="tile"><div class="label">offloads <small>since start</small></div><div class="value" id="offloads" data-value="">–</div></div>
      <div class="tile"><div class="label">fallbacks <small>served co-located after all</small></div><div class="value" id="offload-fallbacks" data-value="">–</div></div>
      <div class="tile"><div class="label">prefill p90 <small>ms, prefill phase</small></div><div class="value" id="prefill-p90" data-value="">–</div></div>
      <div class="tile"><div class="label">transfer p90 <small>ms, decode sent → first byte</small></div><div class="value" id="transfer-p90" data-value="">–</div></div>
    </div>
  </section>
  <section class="card">
    <h2>Routing decisions <small>by reason, since start</small></h2>
    <table class="decisions">
      <thead><tr><th>reason</th><th class="num">decisions</th><th>share</th></tr></thead>
      <tbody id="decisions"></tbody>
    </table>
  </section>
</main>
<footer>Live from <code>/dashboard/events</code> (server-sent events, one frame a second). Same data as JSON: <a href="/dashboard/frame">/dashboard/frame</a>.</footer>
</body>
</html>
`;
}
