/**
 * `kvroute report` as a function: load the input (a sweep directory or a record file), build
 * the figures, render the drawn ones to SVG, write OUT.html and OUT.md beside it.
 */
import { writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';

import { isDrawn, reportFigures, type OmittedFigure } from './report-figures.js';
import { reportHtml, reportMarkdown, type RenderedFigure } from './report-document.js';
import { loadReportInput, ReportError, type ReportInput } from './report-input.js';
import { renderSvg } from './render-svg.js';

export interface ReportResult {
  html: string;
  markdown: string;
  drawn: string[];
  omitted: OmittedFigure[];
}

/** OUT.html for `input` when -o is not given: DIR/report.html, or RUN.html beside a record file. */
export function defaultOutput(input: string, isDirectory: boolean): string {
  if (isDirectory) return join(input, 'report.html');
  return join(dirname(input), `${basename(input).replace(/\.[^.]*$/, '')}.html`);
}

/** The Markdown summary's path: OUT with .html replaced by .md (or .md appended). */
export function markdownPath(out: string): string {
  return /\.html?$/i.test(out) ? out.replace(/\.html?$/i, '.md') : `${out}.md`;
}

/** Writes one output file; a failure is a ReportError naming the path. */
export function write(path: string, text: string): void {
  try {
    writeFileSync(path, text);
  } catch (error) {
    throw new ReportError(`${path}: cannot write (${(error as NodeJS.ErrnoException).code ?? String(error)})`);
  }
}

/** Renders the figures of `input`: the drawn ones with their SVG, and the omitted ones. */
export async function renderFigures(
  input: ReportInput,
): Promise<{ drawn: RenderedFigure[]; omitted: OmittedFigure[] }> {
  const drawn: RenderedFigure[] = [];
  const omitted: OmittedFigure[] = [];
  for (const figure of reportFigures(input)) {
    if (isDrawn(figure)) drawn.push({ ...figure, svg: await renderSvg(figure.spec) });
    else omitted.push(figure);
  }
  return { drawn, omitted };
}

/** Builds the report of `inputPath` into `out` (HTML) and its .md sibling. */
export async function buildReport(inputPath: string, out: string, version: string): Promise<ReportResult> {
  const input = loadReportInput(inputPath);
  const { drawn, omitted } = await renderFigures(input);
  const doc = { input, drawn, omitted, generatedAt: new Date().toISOString(), version };
  const markdown = markdownPath(out);
  write(out, reportHtml(doc));
  write(markdown, reportMarkdown(doc, basename(out)));
  return { html: out, markdown, drawn: drawn.map((f) => f.id), omitted };
}
