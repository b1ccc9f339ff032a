/**
 * The dashboard page's script, served as /dashboard/app.js: plain browser JavaScript (no build
 * step), kept as a string module so that `tsc` ships it. It opens an EventSource on
 * /dashboard/events and, per frame, updates the tiles, two uPlot time series (request rate,
 * TTFT p90; the last HISTORY frames, drawn from the first frame on) and the instance, tenant
 * and decision tables. The tenants table's outcome columns are the frame's `tenants.outcomes`:
 * a cause the server adds shows up with no change here.
 *
 * Invariants:
 * - Everything from a frame reaches the DOM through textContent, dataset or style.width of
 *   elements built with createElement: never innerHTML. Instance ids are URLs an operator
 *   typed; reasons come from the router; tenants and outcomes from clients' headers and flow
 *   control; none is trusted as markup.
 * - Rows are keyed by id in a Map (no CSS selector is built from an id) and reused across
 *   frames, so a frame costs a few text updates, not a table rebuild.
 *
 * Hazard: this text is not linted or type-checked (tsconfig has no DOM types); the browser
 * test fails on any page error, and test/dashboard.test.ts compiles it in Node as a syntax
 * check. Keep it free of template literals so it can live in this string.
 */
export const PAGE_SCRIPT = String.raw`'use strict';
(function () {
  var HISTORY = 300; // frames kept for the charts: five minutes at one a second
  var STALE_MS = 5000; // no frame for this long: say so
  var byId = function (id) { return document.getElementById(id); };
  var intFmt = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  var oneFmt = new Intl.NumberFormat('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 });
  function fmtInt(v) { return v === null || v === undefined ? '–' : intFmt.format(v); }
  function fmtRate(v) { return v === null || v === undefined ? '–' : oneFmt.format(v); }
  function fmtMs(v) { return v === null || v === undefined ? '–' : v < 100 ? oneFmt.format(v) : intFmt.format(v); }
  function fmtPct(v) { return v === null || v === undefined ? '–' : oneFmt.format(v * 100) + '%'; }
  function setValue(el, raw, text) {
    el.dataset.value = raw === null || raw === undefined ? '' : String(raw);
    if (el.textContent !== text) el.textContent = text;
  }

  // ---- status -------------------------------------------------------------------------------
  var statusEl = byId('status');
  var lastFrameAt = 0;
  function setStatus(state, text) {
    statusEl.className = 'status ' + state;
    setValue(statusEl, state, text);
  }
  setInterval(function () {
    if (lastFrameAt !== 0 && Date.now() - lastFrameAt > STALE_MS && statusEl.dataset.value === 'live')
      setStatus('stale', 'no data for ' + Math.round((Date.now() - lastFrameAt) / 1000) + ' s');
  }, 1000);

  // ---- charts -------------------------------------------------------------------------------
  // From the first frame on, a chart shows something: the x axis spans at least WINDOW_S
  // seconds ending at the newest sample (so one sample is a visible point, not a degenerate
  // scale), each sample is a point while there are few, and the legend shows the newest sample
  // whenever the cursor is not over the chart (uPlot's own legend reads "--" then). Before the
  // first frame, a note says what the chart waits for and the legend is hidden.
  var WINDOW_S = 60;
  var SPARSE = 30; // fewer samples than this: each drawn as a point too
  var times = [], rates = [], ttfts = [];
  function chart(el, label, color, fmt, emptyText) {
    var note = document.createElement('div');
    note.className = 'chart-note';
    note.textContent = 'waiting for the first frame…';
    var showNewest = function (u) {
      if (u.cursor.idx === null || u.cursor.idx === undefined) {
        if (times.length > 0) u.setLegend({ idx: times.length - 1 });
      }
    };
    var opts = {
      width: Math.max(200, el.clientWidth),
      height: 200,
      scales: {
        x: { time: true, range: function (u, min, max) {
          if (min === null || max === null) { var now = Date.now() / 1000; return [now - WINDOW_S, now + 1]; }
          return [Math.min(min, max - WINDOW_S), max + 1];
        } },
        y: { range: function (u, min, max) { return [0, Math.max(1, (max || 0) * 1.15)]; } },
      },
      series: [
        {},
        { label: label, stroke: color, width: 2, fill: color + '22',
          points: { show: function () { return times.length < SPARSE; }, size: 7, fill: color },
          value: function (u, v) { return v === null || v === undefined ? '–' : fmt(v); } },
      ],
      axes: [{}, { size: 60, values: function (u, splits) { return splits.map(fmt); } }],
      cursor: { drag: { x: false, y: false } },
      hooks: { setCursor: [showNewest] },
    };
    var u = new uPlot(opts, [times, []], el);
    el.classList.add('waiting');
    el.appendChild(note);
    return {
      u: u,
      setData: function (values) {
        u.setData([times, values]);
        showNewest(u);
        var any = values.some(function (v) { return v !== null && v !== undefined; });
        el.classList.remove('waiting');
        el.classList.toggle('empty', !any);
        note.textContent = any ? '' : emptyText;
      },
      setSize: function () { u.setSize({ width: Math.max(200, el.clientWidth), height: 200 }); },
    };
  }
  var rateChart = chart(byId('chart-rate'), 'req/s', '#2f6fde', fmtRate, 'no requests yet');
  var ttftChart = chart(byId('chart-ttft'), 'TTFT p90 ms', '#c2410c', fmtMs, 'no first token in the window yet');
  window.addEventListener('resize', function () { rateChart.setSize(); ttftChart.setSize(); });

  // ---- tables -------------------------------------------------------------------------------
  function cell(tr, cls) {
    var td = document.createElement('td');
    td.className = cls;
    tr.appendChild(td);
    return td;
  }
  function meterCell(tr, cls) {
    var td = cell(tr, cls);
    var meter = document.createElement('span');
    meter.className = 'meter';
    var fill = document.createElement('span');
    meter.appendChild(fill);
    var text = document.createElement('span');
    text.className = 'value';
    td.appendChild(meter);
    td.appendChild(text);
    return { td: td, fill: fill, text: text };
  }
  function setMeter(m, fraction, text) {
    var w = fraction === null || fraction === undefined ? 0 : Math.max(0, Math.min(1, fraction));
    m.fill.style.width = (w * 100).toFixed(1) + '%';
    m.td.dataset.value = fraction === null || fraction === undefined ? '' : String(fraction);
    if (m.text.textContent !== text) m.text.textContent = text;
  }
  // Keeps tbody's rows in the given order, removing rows not in it.
  function place(tbody, rows, order) {
    for (var i = 0; i < order.length; i++) {
      var row = rows.get(order[i]).tr;
      if (tbody.children[i] !== row) tbody.insertBefore(row, tbody.children[i] || null);
    }
    while (tbody.children.length > order.length) tbody.removeChild(tbody.lastChild);
  }

  var instanceRows = new Map();
  var instancesBody = byId('instances');
  function instanceRow(id) {
    var tr = document.createElement('tr');
    tr.dataset.instance = id;
    var r = { tr: tr, id: cell(tr, 'id'), models: cell(tr, 'models'), health: cell(tr, 'health'), inFlight: cell(tr, 'in-flight'),
      kv: meterCell(tr, 'kv-usage'), hit: meterCell(tr, 'hit-rate'), engineHit: meterCell(tr, 'engine-hit-rate'),
      prefill: cell(tr, 'prefill-speed'), requests: cell(tr, 'requests'), errors: cell(tr, 'errors') };
    r.id.textContent = id;
    r.id.title = id;
    return r;
  }
  function renderInstances(list) {
    var seen = new Set(), order = [];
    for (var i = 0; i < list.length; i++) {
      var inst = list[i];
      var r = instanceRows.get(inst.id);
      if (r === undefined) { r = instanceRow(inst.id); instanceRows.set(inst.id, r); }
      seen.add(inst.id);
      order.push(inst.id);
      var models = inst.models === null ? 'any' : inst.models.join(', ') || 'none';
      setValue(r.models, models, models);
      var health = inst.drained ? 'drained' : inst.healthy ? 'ok' : 'bad';
      r.health.className = 'health ' + health;
      setValue(r.health, health, inst.drained ? 'drained' : inst.healthy ? 'healthy' : 'unhealthy');
      setValue(r.inFlight, inst.inFlight, fmtInt(inst.inFlight));
      setMeter(r.kv, inst.kvUsage, fmtPct(inst.kvUsage));
      setMeter(r.hit, inst.hitRate, fmtPct(inst.hitRate));
      setMeter(r.engineHit, inst.engineHitRate, fmtPct(inst.engineHitRate));
      // The learned prefill speed, and the first tokens it rests on (0: still the preset's prior).
      setValue(r.prefill, inst.prefillTokensPerSecond, inst.prefillTokensPerSecond === null ? '–' :
        (inst.prefillTokensPerSecond / 1000).toFixed(1) + ' k tok/s (' + fmtInt(inst.costObservations) + ' obs)');
      setValue(r.requests, inst.requests, fmtInt(inst.requests));
      setValue(r.errors, inst.errors + inst.upstreamErrors, fmtInt(inst.errors) +
        (inst.upstreamErrors > 0 ? ' (+' + fmtInt(inst.upstreamErrors) + ' upstream)' : ''));
    }
    instanceRows.forEach(function (r, id) { if (!seen.has(id)) instanceRows.delete(id); });
    if (order.length === 0) {
      instancesBody.replaceChildren();
      var tr = document.createElement('tr');
      tr.className = 'empty';
      var td = cell(tr, 'none');
      td.colSpan = 10;
      td.textContent = 'no backends';
      instancesBody.appendChild(tr);
      return;
    }
    place(instancesBody, instanceRows, order);
  }

  var decisionRows = new Map();
  var decisionsBody = byId('decisions');
  function renderDecisions(decisions) {
    // Only reasons that occurred: each policy uses a few of the router's dozen.
    var reasons = Object.keys(decisions).filter(function (k) { return decisions[k] > 0; }).sort();
    var total = 0;
    for (var i = 0; i < reasons.length; i++) total += decisions[reasons[i]];
    for (var j = 0; j < reasons.length; j++) {
      var reason = reasons[j], count = decisions[reason];
      var r = decisionRows.get(reason);
      if (r === undefined) {
        var tr = document.createElement('tr');
        tr.dataset.reason = reason;
        r = { tr: tr, reason: cell(tr, 'reason'), count: cell(tr, 'count'), share: meterCell(tr, 'share') };
        r.reason.textContent = reason;
        decisionRows.set(reason, r);
      }
      setValue(r.count, count, fmtInt(count));
      setMeter(r.share, total > 0 ? count / total : null, total > 0 ? fmtPct(count / total) : '–');
    }
    decisionRows.forEach(function (r, reason) { if (!(decisions[reason] > 0)) decisionRows.delete(reason); });
    place(decisionsBody, decisionRows, reasons);
    if (reasons.length === 0) {
      var tr = document.createElement('tr');
      tr.className = 'empty';
      var td = cell(tr, 'none');
      td.colSpan = 3;
      td.textContent = 'no decisions yet';
      decisionsBody.appendChild(tr);
    }
  }

  // ---- tenants (flow control) ---------------------------------------------------------------
  var tenantsPanel = byId('tenants-panel'), tenantsBody = byId('tenants'), tenantsHead = byId('tenants-head');
  var tenantsNote = byId('tenants-note');
  var tenantRows = new Map(), tenantOutcomes = null, tenantColumns = 0;
  function headCell(text, cls, title) {
    var th = document.createElement('th');
    th.textContent = text;
    if (cls) th.className = cls;
    if (title) th.title = title;
    tenantsHead.appendChild(th);
  }
  // The outcome columns changed (the first frame, or a new cause): new head, rows rebuilt.
  function tenantHead(outcomes) {
    tenantsHead.replaceChildren();
    headCell('tenant', '', 'top tenants by traffic; other: the rest, summed');
    headCell('class', '', 'priority class');
    headCell('waiting', 'num', 'requests waiting for a slot now');
    headCell('wait p90', 'num', 'queue wait p90 of the requests decided in the window, ms (0: a slot was free)');
    for (var i = 0; i < outcomes.length; i++) headCell(outcomes[i], 'num', 'requests ' + outcomes[i] + ' in the window');
    headCell('tokens in/min', 'num', 'input tokens let in, per minute over the window');
    headCell('tokens out/min', 'num', 'output tokens streamed, per minute over the window');
    headCell('rpm left', 'num', 'what the requests-per-minute bucket holds now / the limit');
    headCell('tpm left', 'num', 'what the tokens-per-minute bucket holds now / the limit (negative: overdrawn by output)');
    tenantColumns = outcomes.length + 8;
    tenantRows.clear();
    tenantsBody.replaceChildren();
  }
  function tenantRow(row, outcomes) {
    var tr = document.createElement('tr');
    tr.dataset.tenant = row.tenant;
    tr.dataset.priority = row.priority;
    if (row.other) tr.dataset.other = 'true';
    var r = { tr: tr, tenant: cell(tr, 'tenant'), priority: cell(tr, 'priority'), waiting: cell(tr, 'waiting'),
      p90: cell(tr, 'wait-p90'), outcomes: new Map() };
    r.tenant.textContent = row.tenant;
    r.tenant.title = row.other ? 'the tenants beyond the top ones, summed' : row.tenant;
    r.priority.textContent = row.priority;
    for (var i = 0; i < outcomes.length; i++) {
      var td = cell(tr, 'outcome');
      td.dataset.outcome = outcomes[i];
      r.outcomes.set(outcomes[i], td);
    }
    r.tokensIn = cell(tr, 'tokens-in');
    r.tokensOut = cell(tr, 'tokens-out');
    r.rpm = cell(tr, 'rpm-left');
    r.tpm = cell(tr, 'tpm-left');
    return r;
  }
  function setLeft(td, left, limit) {
    setValue(td, left, left === null || left === undefined ? '–' : fmtInt(Math.floor(left)) + ' / ' + fmtInt(limit));
  }
  function renderTenants(t) {
    if (!t) return; // a server without the panel
    var key = t.outcomes.join('\u0000');
    if (key !== tenantOutcomes) { tenantOutcomes = key; tenantHead(t.outcomes); }
    tenantsPanel.dataset.state = t.rows.length > 0 ? 'live' : t.enabled ? 'idle' : 'off';
    var note = 'last ' + t.windowSeconds + ' s';
    if (!t.enabled) note += ' · flow control off (no --max-in-flight, no rate limit): counts only';
    if (t.folded > 0) note += ' · ' + fmtInt(t.folded) + ' more tenants in other';
    if (tenantsNote.textContent !== note) tenantsNote.textContent = note;
    var seen = new Set(), order = [];
    for (var i = 0; i < t.rows.length; i++) {
      var row = t.rows[i], id = (row.other ? '1' : '0') + row.tenant + '\u0000' + row.priority;
      var r = tenantRows.get(id);
      if (r === undefined) { r = tenantRow(row, t.outcomes); tenantRows.set(id, r); }
      seen.add(id);
      order.push(id);
      setValue(r.waiting, row.waiting, fmtInt(row.waiting));
      setValue(r.p90, row.waitP90Ms, fmtMs(row.waitP90Ms));
      for (var j = 0; j < t.outcomes.length; j++) {
        var name = t.outcomes[j], n = row.outcomes[name] || 0, td = r.outcomes.get(name);
        setValue(td, n, fmtInt(n));
        td.className = 'outcome' + (name !== 'admitted' && n > 0 ? ' refused' : '');
      }
      setValue(r.tokensIn, row.inputTokensPerMinute, fmtInt(row.inputTokensPerMinute));
      setValue(r.tokensOut, row.outputTokensPerMinute, fmtInt(row.outputTokensPerMinute));
      var limits = row.limits || {};
      setLeft(r.rpm, limits.rpmRemaining, limits.rpm);
      setLeft(r.tpm, limits.tpmRemaining, limits.tpm);
    }
    tenantRows.forEach(function (r, id) { if (!seen.has(id)) tenantRows.delete(id); });
    place(tenantsBody, tenantRows, order);
    if (order.length === 0) {
      var tr = document.createElement('tr');
      tr.className = 'empty';
      var empty = cell(tr, 'none');
      empty.colSpan = tenantColumns;
      empty.textContent = t.enabled ? 'no requests in the last ' + t.windowSeconds + ' s' :
        'flow control off: no --max-in-flight and no tenant with rpm or tpm';
      tenantsBody.appendChild(tr);
    }
  }

  // ---- frames -------------------------------------------------------------------------------
  function onFrame(f) {
    lastFrameAt = Date.now();
    setStatus('live', 'live');
    setValue(byId('policy'), f.policy, f.policy);
    setValue(byId('requests-total'), f.requestsTotal, fmtInt(f.requestsTotal));
    setValue(byId('request-rate'), f.requestRate, fmtRate(f.requestRate));
    setValue(byId('ttft-p90'), f.ttftP90Ms, fmtMs(f.ttftP90Ms));
    setValue(byId('hit-rate'), f.hitRate, fmtPct(f.hitRate));
    setValue(byId('errors-total'), f.errorsTotal, fmtInt(f.errorsTotal));
    setValue(byId('offloads'), f.offloads, fmtInt(f.offloads));
    setValue(byId('offload-fallbacks'), f.offloadFallbacks, fmtInt(f.offloadFallbacks));
    setValue(byId('prefill-p90'), f.prefillP90Ms, fmtMs(f.prefillP90Ms));
    setValue(byId('transfer-p90'), f.transferP90Ms, fmtMs(f.transferP90Ms));
    if (times.length === 0 || f.t / 1000 > times[times.length - 1]) {
      times.push(f.t / 1000);
      rates.push(f.requestRate);
      ttfts.push(f.ttftP90Ms);
      if (times.length > HISTORY) { times.shift(); rates.shift(); ttfts.shift(); }
      rateChart.setData(rates);
      ttftChart.setData(ttfts);
    }
    renderInstances(f.instances);
    renderDecisions(f.decisions);
    renderTenants(f.tenants);
  }

  var source = new EventSource('/dashboard/events');
  source.onopen = function () { setStatus('live', 'live'); };
  source.onerror = function () { setStatus('reconnecting', 'reconnecting…'); };
  source.onmessage = function (e) {
    var frame;
    try { frame = JSON.parse(e.data); } catch (err) { return; }
    onFrame(frame);
  };
})();
`;
