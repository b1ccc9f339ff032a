/**
 * The report's two documents: one self-contained HTML file (inline CSS, each figure's SVG
 * inline, no script, no external URL) and a Markdown summary of the same facts for a pull
 * request or a notebook.
 *
 * Invariants:
 * - Every string from the input (paths, policy names, commands) is escaped before it reaches
 *   the HTML; the SVG comes from Vega's serialiser, which escapes its text.
 * - Stable hooks for tests and scrapers: `figure[data-figure="<id>"]` per drawn figure,
 *   `li[data-omitted="<id>"]` per omitted one, `#provenance`, `#runs` (in `#runs-card`; the
 *   best run's row `tr.best`), `#es-ablation` (each row's verdict in `td[data-verdict]`).
 * - Every table sits in a card that scrolls sideways rather than spill out of the page.
 */
import { ES_COLUMNS, esNote, esRow } from './es-ablation.js';
import type { DrawnFigure, OmittedFigure } from './report-figures.js';
import type { ReportCell, ReportInput } from './report-input.js';
import { BEST_RUN_CRITERION, bestRunId } from './run-style.js';

export interface RenderedFigure extends DrawnFigure {
  svg: string;
}

export interface ReportDocumentInput {
  input: ReportInput;
  drawn: RenderedFigure[];
  omitted: OmittedFigure[];
  /** ISO 8601: when the report was made. */
  generatedAt: string;
  /** The version of kvroute that made the report. */
  version: string;
}

export const escapeHtml = (text: string): string =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** A shell-like rendering of an argv list, for reading (not for pasting into every shell). */
export function commandLine(argv: readonly string[]): string {
  return ['kvroute', ...argv]
    .map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", `'\\''`)}'`))
    .join(' ');
}

const pct = (v: number): string => `${(v * 100).toFixed(1)}%`;
const num = (v: number | null | undefined, digits = 2): string =>
  v === null || v === undefined ? 'n/a' : v.toFixed(digits);

function runRow(cell: ReportCell): string[] {
  const s = cell.summary;
  return [
    cell.id,
    cell.policy,
    cell.engine_state ?? cell.header?.engine_state ?? '',
    cell.mode ?? cell.header?.source ?? '',
    String(s.requests),
    s.failed === undefined ? 'n/a' : String(s.failed),
    `${num(s.ttft_s.p50)} / ${num(s.ttft_s.p90)} / ${num(s.ttft_s.p99)}`,
    `${num(s.tpot_ms.p50, 1)} / ${num(s.tpot_ms.p90, 1)} / ${num(s.tpot_ms.p99, 1)}`,
    `${num(s.e2e_s.p50)} / ${num(s.e2e_s.p90)} / ${num(s.e2e_s.p99)}`,
    pct(s.apc),
    num(s.interference_index),
    num(s.hotspot_index),
    s.slow === undefined ? 'n/a' : String(s.slow.n_slow),
  ];
}

const RUN_COLUMNS = [
  'run',
  'policy',
  'engine state',
  'mode',
  'requests',
  'failed',
  'TTFT p50/p90/p99 s',
  'TPOT p50/p90/p99 ms',
  'E2E p50/p90/p99 s',
  'APC',
  'interference',
  'hotspot',
  'slow',
];

function provenance(doc: ReportDocumentInput): [string, string][] {
  const { input } = doc;
  const rows: [string, string][] = [
    [input.kind === 'sweep' ? 'sweep' : 'run', input.source],
    ['trace', input.trace.path],
    ['trace fingerprint', input.trace.fingerprint],
    ['kvroute (data)', input.kvroute_version],
    ['started', input.started_at],
  ];
  for (const argv of input.commands) rows.push(['command', commandLine(argv)]);
  if (input.engine !== undefined) rows.push(['engine model', input.engine]);
  if (input.fleet !== undefined)
    rows.push(['fleet', `${input.fleet} (mixed: groups of instances in order, each its own multipliers)`]);
  if (input.traceSummary !== undefined)
    rows.push(['trace size', `${input.traceSummary.requests} requests, ${input.traceSummary.sessions} sessions`]);
  rows.push(['report', `kvroute ${doc.version}, ${doc.generatedAt}`]);
  return rows;
}

export const CSS = `body{font:15px/1.5 system-ui,sans-serif;margin:2rem auto;max-width:80rem;padding:0 1rem;color:#1f2937}
h1{font-size:1.6rem;margin-bottom:.2rem}h2{font-size:1.2rem;margin-top:2rem}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #d1d5db;padding:.25rem .45rem;text-align:left;vertical-align:top}
th{background:#f3f4f6}code{font-size:13px;overflow-wrap:anywhere}
.card,figure{margin:1.5rem 0;padding:1rem;border:1px solid #e5e7eb;border-radius:6px}
.card{overflow-x:auto}.card h2,figure h2{margin-top:0}.card p{color:#4b5563;margin:.5rem 0 0}
#runs td:first-child{white-space:nowrap}#runs .num{white-space:nowrap}
tr.best td{background:#fef9c3;font-weight:600}tr.best td:first-child::before{content:"★ "}
.verdict{display:inline-block;padding:0 .4rem;border-radius:4px;font-weight:700}
.verdict-HELPS{background:#dcfce7;color:#166534}.verdict-HURTS{background:#fee2e2;color:#991b1b}
.verdict-wash{background:#f3f4f6;color:#374151}
figure{overflow-x:auto}figure svg{max-width:100%;height:auto}figcaption{color:#4b5563;margin-top:.5rem}`;

/** The runs table's columns that hold figures (kept on one line each). */
const NUMERIC_COLUMNS = new Set([4, 5, 6, 7, 8, 9, 10, 11, 12]);

/** The ES ablation's card, or nothing when no policy ran under both engine states. */
function esSection(input: ReportInput): string {
  if (input.esPairs.length === 0) return '';
  const e = escapeHtml;
  const rows = input.esPairs.map((pair) => {
    const cells = esRow(pair);
    const verdict = cells.pop()!;
    return `<tr>${cells.map((v) => `<td>${e(v)}</td>`).join('')}<td data-verdict="${e(verdict)}"><span class="verdict verdict-${e(verdict)}">${e(verdict)}</span></td></tr>`;
  });
  return `<section class="card" id="es-ablation-card">
<h2>ES ablation: shadow (es0) → shm (es1)</h2>
<table id="es-ablation">
<thead><tr>${ES_COLUMNS.map((c) => `<th>${e(c)}</th>`).join('')}</tr></thead>
<tbody>
${rows.join('\n')}
</tbody>
</table>
<p>${e(esNote())}</p>
</section>`;
}

/** The self-contained HTML report. */
export function reportHtml(doc: ReportDocumentInput): string {
  const e = escapeHtml;
  const prov = provenance(doc)
    .map(([k, v]) => `<tr><th>${e(k)}</th><td><code>${e(v)}</code></td></tr>`)
    .join('\n');
  const best = bestRunId(doc.input.cells);
  const runs = doc.input.cells
    .map(
      (cell) =>
        `<tr${cell.id === best ? ' class="best"' : ''}>${runRow(cell)
          .map((v, i) => `<td${NUMERIC_COLUMNS.has(i) ? ' class="num"' : ''}>${e(v)}</td>`)
          .join('')}</tr>`,
    )
    .join('\n');
  const figures = doc.drawn
    .map(
      (f) =>
        `<figure data-figure="${e(f.id)}">\n<h2>${e(f.title)}</h2>\n${f.svg}\n<figcaption>${e(f.caption)}</figcaption>\n</figure>`,
    )
    .join('\n');
  const omitted =
    doc.omitted.length === 0
      ? ''
      : `<h2>Figures not shown</h2>\n<ul id="omitted">\n${doc.omitted
          .map((f) => `<li data-omitted="${e(f.id)}"><b>${e(f.title)}</b>: ${e(f.omitted)}.</li>`)
          .join('\n')}\n</ul>`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kvroute report: ${e(doc.input.trace.path)}</title>
<style>${CSS}</style>
</head>
<body>
<h1>kvroute report</h1>
<table id="provenance">
${prov}
</table>
<section class="card" id="runs-card">
<h2>Runs</h2>
<table id="runs">
<thead><tr>${RUN_COLUMNS.map((c) => `<th>${e(c)}</th>`).join('')}</tr></thead>
<tbody>
${runs}
</tbody>
</table>
${best === undefined ? '' : `<p id="best-run">★ Best run: <b>${e(best)}</b>, by ${e(BEST_RUN_CRITERION)}.</p>`}
</section>
${esSection(doc.input)}
${figures}
${omitted}
</body>
</html>
`;
}

const mdCell = (text: string): string => text.replaceAll('|', '\\|').replaceAll('\n', ' ');

/** The Markdown summary: provenance, the runs table, and each figure's caption (or why omitted). */
export function reportMarkdown(doc: ReportDocumentInput, htmlName: string): string {
  const lines = ['# kvroute report', ''];
  for (const [k, v] of provenance(doc)) lines.push(`- ${k}: \`${v.replaceAll('`', "'")}\``);
  lines.push('', '## Runs', '', `| ${RUN_COLUMNS.join(' | ')} |`, `|${RUN_COLUMNS.map(() => ' --- ').join('|')}|`);
  const best = bestRunId(doc.input.cells);
  for (const cell of doc.input.cells) {
    const row = runRow(cell).map(mdCell);
    if (cell.id === best) row[0] = `★ **${row[0]}**`;
    lines.push(`| ${row.join(' | ')} |`);
  }
  if (best !== undefined) lines.push('', `★ Best run: **${best}**, by ${BEST_RUN_CRITERION}.`);
  if (doc.input.esPairs.length > 0) {
    lines.push('', '## ES ablation: shadow (es0) → shm (es1)', '');
    lines.push(`| ${ES_COLUMNS.join(' | ')} |`, `|${ES_COLUMNS.map(() => ' --- ').join('|')}|`);
    for (const pair of doc.input.esPairs) lines.push(`| ${esRow(pair).map(mdCell).join(' | ')} |`);
    lines.push('', esNote());
  }
  lines.push('', `## Figures (in [${htmlName}](${encodeURI(htmlName)}))`, '');
  for (const f of doc.drawn) lines.push(`- **${f.title}**: ${f.caption}`);
  if (doc.omitted.length > 0) {
    lines.push('', '## Figures not shown', '');
    for (const f of doc.omitted) lines.push(`- **${f.title}**: ${f.omitted}.`);
  }
  return `${lines.join('\n')}\n`;
}
