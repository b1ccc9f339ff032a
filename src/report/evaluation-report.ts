/**
 * `kvroute report DIR` for a policy evaluation directory (evaluation-input.ts): per evaluation
 * file, the table of every policy's TTFT p90 by regime and one figure of each policy's TTFT p90
 * relative to the best policy of its regime, as one self-contained HTML file (the figures as
 * static SVG from Vega-Lite, no script) and a Markdown summary.
 *
 * When the file records issue #28's targets, the set's targets table follows (evaluation-targets.ts),
 * and its regimes' setups (trace command, sweep flags) after it.
 *
 * Stable hooks: `table[data-set="<set>"]` and `figure[data-figure="<set>"]` per file, and
 * `table[data-targets="<set>"]` when it has targets.
 */
import { write } from './build-report.js';
import { loadEvaluation, type EvaluationSet } from './evaluation-input.js';
import { setupsMarkdown, targetsMarkdown, targetsTable } from './evaluation-targets.js';
import { CSS, escapeHtml } from './report-document.js';
import type { VegaLiteSpec } from './report-figures.js';
import { renderSvg } from './render-svg.js';

/** Ratios above this are drawn at it (round_robin is 5–40× the best): the chart is about the leaders. */
const RATIO_CAP = 2;

function figureSpec(set: EvaluationSet): VegaLiteSpec {
  const values = set.regimes.flatMap((regime) => {
    const best = Math.min(...regime.rows.map((r) => r.ttftP90));
    return regime.rows.map((r) => ({
      regime: regime.name,
      policy: r.policy,
      ratio: Math.min(RATIO_CAP, r.ttftP90 / best),
      ttft: r.ttftP90,
    }));
  });
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    data: { values },
    width: 640,
    height: 300,
    config: {
      font: 'sans-serif',
      view: { stroke: null },
      axis: { labelFontSize: 12, titleFontSize: 13 },
      legend: { labelLimit: 240, labelFontSize: 12, titleFontSize: 12 },
    },
    mark: { type: 'point', filled: true, size: 70 },
    encoding: {
      x: { field: 'regime', type: 'nominal', sort: null, title: null, axis: { labelAngle: -20 } },
      y: {
        field: 'ratio',
        type: 'quantitative',
        title: `TTFT p90 ÷ the regime's best (capped at ${RATIO_CAP})`,
        scale: { domain: [1, RATIO_CAP] },
      },
      color: { field: 'policy', type: 'nominal', sort: set.policies, title: 'policy' },
      shape: { field: 'policy', type: 'nominal', sort: set.policies, title: 'policy' },
    },
  };
}

const fmt = (x: number, digits = 2): string => x.toFixed(digits);

/** Rows of regime × policy TTFT p90, the lowest of each regime marked. */
function tableRows(set: EvaluationSet): { regime: string; cells: { text: string; best: boolean }[] }[] {
  return set.regimes.map((regime) => {
    const best = Math.min(...regime.rows.map((r) => r.ttftP90));
    return {
      regime: regime.name,
      cells: regime.rows.map((r) => ({ text: fmt(r.ttftP90), best: r.ttftP90 === best })),
    };
  });
}

const caption = (set: EvaluationSet): string =>
  `Each policy's TTFT p90 in each regime of ${set.file}, divided by the lowest TTFT p90 of that regime ` +
  `(1 = the best policy there; above ${RATIO_CAP} drawn at ${RATIO_CAP}). Means over seeds ${set.seeds.join(', ')}.`;

/** The label of a set's regime column (the perturbations vary the engine model). */
const regimeLabel = (set: EvaluationSet): string => (set.set === 'perturbations' ? 'engine model' : 'regime');

/** The set's targets table and setups as HTML, or nothing when the file has neither. */
function targetsHtml(set: EvaluationSet): string[] {
  const e = escapeHtml;
  const html: string[] = [];
  if (set.targets !== undefined && set.targets.size > 0) {
    const t = targetsTable(set.targets, regimeLabel(set));
    html.push(
      `<h3>Targets</h3>`,
      `<table data-targets="${e(set.set)}"><thead><tr>${t.header.map((h) => `<th>${e(h)}</th>`).join('')}</tr></thead><tbody>`,
      ...t.rows.map(
        ([regime, ...cells]) => `<tr><th>${e(regime!)}</th>${cells.map((c) => `<td>${e(c)}</td>`).join('')}</tr>`,
      ),
      '</tbody></table>',
      `<ul>${t.summary.map((line) => `<li>${e(line)}</li>`).join('')}</ul>`,
    );
  }
  if (set.setups !== undefined && set.setups.size > 0) {
    const items = setupsMarkdown(set.setups).map((line) => line.replace(/^- /, ''));
    html.push(`<h3>How each regime ran</h3>`, `<ul>${items.map((item) => `<li>${e(item)}</li>`).join('')}</ul>`);
  }
  return html;
}

/** The same as Markdown lines. */
function targetsMd(set: EvaluationSet): string[] {
  const md: string[] = [];
  if (set.targets !== undefined && set.targets.size > 0)
    md.push('### Targets', '', ...targetsMarkdown(set.targets, regimeLabel(set)), '');
  if (set.setups !== undefined && set.setups.size > 0)
    md.push('### How each regime ran', '', ...setupsMarkdown(set.setups), '');
  return md;
}

export interface EvaluationReportResult {
  html: string;
  markdown: string;
  drawn: string[];
}

/** Builds the evaluation report of `dir` into `out` (HTML) and `markdown`. */
export async function buildEvaluationReport(
  dir: string,
  out: string,
  markdown: string,
  version: string,
): Promise<EvaluationReportResult> {
  const sets = loadEvaluation(dir);
  const e = escapeHtml;
  const generatedAt = new Date().toISOString();
  const html: string[] = [];
  const md = ['# kvroute policy evaluation', '', `- directory: \`${dir}\``, `- kvroute ${version}, ${generatedAt}`, ''];
  for (const set of sets) {
    const rows = tableRows(set);
    const svg = await renderSvg(figureSpec(set));
    html.push(
      `<h2>${e(set.set)} (seeds ${e(set.seeds.join(', '))}${set.fleet === undefined ? '' : `; fleet ${e(set.fleet)}`})</h2>`,
      `<table data-set="${e(set.set)}"><thead><tr><th>TTFT p90 (s)</th>${set.policies.map((p) => `<th>${e(p)}</th>`).join('')}</tr></thead><tbody>`,
      ...rows.map(
        (row) =>
          `<tr><th>${e(row.regime)}</th>${row.cells.map((c) => `<td>${c.best ? `<b>${e(c.text)}</b>` : e(c.text)}</td>`).join('')}</tr>`,
      ),
      '</tbody></table>',
      `<figure data-figure="${e(set.set)}">\n${svg}\n<figcaption>${e(caption(set))}</figcaption>\n</figure>`,
      ...targetsHtml(set),
    );
    md.push(
      `## ${set.set} (seeds ${set.seeds.join(', ')}${set.fleet === undefined ? '' : `; fleet ${set.fleet}`}; ${set.file})`,
      '',
      `| TTFT p90 (s) | ${set.policies.join(' | ')} |`,
      `| --- |${set.policies.map(() => ' ---: |').join('')}`,
      ...rows.map(
        (row) => `| ${row.regime} | ${row.cells.map((c) => (c.best ? `**${c.text}**` : c.text)).join(' | ')} |`,
      ),
      '',
      caption(set),
      '',
      ...targetsMd(set),
    );
  }
  write(
    out,
    `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kvroute policy evaluation: ${e(dir)}</title>
<style>${CSS}</style>
</head>
<body>
<h1>kvroute policy evaluation</h1>
<p id="provenance">${e(dir)} · kvroute ${e(version)} · ${e(generatedAt)} · files ${e(sets.map((s) => s.file).join(', '))}</p>
${html.join('\n')}
</body>
</html>
`,
  );
  write(markdown, md.join('\n'));
  return { html: out, markdown, drawn: sets.map((s) => s.set) };
}
