/**
 * `kvroute report`: a sweep directory made by kvroute itself (test/helpers/report-fixture.ts)
 * and a single run's record file into HTML + Markdown; figures omitted (and said so) when the
 * input lacks their data; bad input refused naming the file (exit 1); and the page in headless
 * Chromium (test/helpers/browser.ts): every drawn figure present, with data marks and a
 * non-empty box.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL, fileURLToPath } from 'node:url';

import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildReport, markdownPath } from '../src/report/build-report.js';
import { reportFigures } from '../src/report/report-figures.js';
import { runMetrics } from '../src/analysis/run-metrics.js';
import { loadReportInput } from '../src/report/report-input.js';
import type { RequestRecord } from '../src/trace/records.js';
import { launchBrowser, newPage } from './helpers/browser.js';
import { buildSweepFixture, FIXTURE_CELLS, FIXTURE_POLICIES, type SweepFixture } from './helpers/report-fixture.js';

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const ALL_FIGURES = [
  'latency',
  'apc-ceiling',
  'apc-hotspot',
  'per-worker-ttft',
  'slow-causes',
  'kv-footprint',
  'reuse',
  'interference',
  'engine-state',
];

/** The page's DOM, as much as the functions run in the browser use (tsconfig has no DOM lib). */
interface Box {
  width: number;
  height: number;
}
interface PageNode {
  getAttribute(name: string): string | null;
  querySelector(selector: string): (PageNode & { getBoundingClientRect(): Box }) | null;
  querySelectorAll(selector: string): { length: number };
}
declare const document: { querySelectorAll(selector: string): Iterable<PageNode> };

let fixture: SweepFixture;
const variants: string[] = [];

beforeAll(() => {
  fixture = buildSweepFixture();
});

afterAll(() => {
  for (const dir of [fixture.dir, ...variants]) rmSync(dir, { recursive: true, force: true });
});

const report = (args: string[]) => spawnSync(process.execPath, [CLI, 'report', ...args], { encoding: 'utf8' });

/** A copy of the fixture's sweep directory with `edit` applied to sweep.json. */
function variant(name: string, edit: (sweep: Record<string, unknown>) => void): string {
  const dir = join(fixture.dir, '..', `${fixture.dir.split('/').pop()}-${name}`);
  cpSync(fixture.dir, dir, { recursive: true });
  variants.push(dir);
  const path = join(dir, 'sweep.json');
  const sweep = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
  edit(sweep);
  writeFileSync(path, JSON.stringify(sweep));
  return dir;
}

describe('kvroute report on a sweep directory', () => {
  it('writes one self-contained HTML file and a Markdown summary', () => {
    const out = join(fixture.dir, 'out', 'sweep.html');
    mkdirSync(join(fixture.dir, 'out'), { recursive: true });
    const run = report([fixture.dir, '-o', out]);
    expect(run.stderr).toContain(`wrote ${out} (8 figures; not shown: slow-causes)`);
    expect(run.status).toBe(0);
    const html = readFileSync(out, 'utf8');
    for (const id of ALL_FIGURES.filter((f) => f !== 'slow-causes')) expect(html).toContain(`data-figure="${id}"`);
    expect(html).toContain('data-omitted="slow-causes"');
    expect(html).not.toMatch(/<script|<link|src="http|href="http/); // nothing to fetch at view time
    for (const p of FIXTURE_POLICIES) expect(html).toContain(`<td>${p}</td>`);
    expect(html).toContain('kvroute sweep --trace t.jsonl');
    const md = readFileSync(markdownPath(out), 'utf8');
    expect(md).toContain('- trace: `t.jsonl`');
    expect(md).toContain('| sticky | sticky | shadow | sim |');
    expect(md).toContain('| sticky-shm | sticky | shm | sim |');
    expect(md).toContain('**Slow-request causes**: no run summary has a slow-request breakdown');
    // The ES ablation (sticky ran under both engine states), in both documents; the best run starred.
    expect(html).toMatch(/<table id="es-ablation">[\s\S]*<td>sticky<\/td>[\s\S]*data-verdict="(HELPS|wash|HURTS)"/);
    expect(md).toContain('## ES ablation: shadow (es0) → shm (es1)');
    expect(md).toMatch(/\| sticky \| .* \| (HELPS|wash|HURTS) \|/);
    expect(html.match(/<tr class="best">/g)).toHaveLength(1);
    expect(md).toContain('★ Best run: **');
  });

  it('draws the slow causes, per-run reuse and given per-instance numbers when the summaries have them', async () => {
    const dir = variant('full', () => {});
    for (const [i, cell] of FIXTURE_CELLS.entries()) {
      const path = join(dir, 'cells', cell.id, 'summary.json');
      const summary = JSON.parse(readFileSync(path, 'utf8')) as Record<string, unknown>;
      summary.slow = {
        n_slow: 10 + i,
        causes: { same_worker_prefill_overlap: 4, hot_worker_queue: 3 + i, cache_miss_large_append: 2, unknown: 1 },
      };
      summary.per_instance = [0, 1, 2].map((instance) => ({ instance, requests: 5, ttft_p90_s: 1 + instance + i }));
      // analyze run --json's shape ({fractions, tokens}, or null without the trace), and a flat split.
      const split = { intra_session: 0.9, cross_session: 0.08, shared_prefix: 0.02, unclassified: 0 };
      summary.reuse = [{ fractions: split, tokens: split }, split, null][i % 3];
      writeFileSync(path, JSON.stringify(summary));
    }
    const input = loadReportInput(dir);
    expect(input.cells[2]!.summary.per_instance).toHaveLength(3); // taken as given, not recomputed
    expect(input.cells.map((c) => c.summary.reuse?.intra_session)).toEqual([0.9, 0.9, undefined, 0.9]);
    const figures = reportFigures(input);
    expect(figures.filter((f) => 'omitted' in f)).toEqual([]);
    const out = join(dir, 'r.html');
    const result = await buildReport(dir, out, 'test');
    expect(result.drawn).toEqual(ALL_FIGURES);
    expect(readFileSync(out, 'utf8')).toContain('hot_worker_queue');
  });
});

describe('kvroute report on one record file', () => {
  it('computes per-instance TTFT p90, leaving out requests no instance answered', () => {
    const record = (instance: number, ttft: number): RequestRecord => ({
      session: 's',
      turn: 1,
      instance,
      dispatch: 10,
      first_token: 10 + ttft,
      finish: 20,
      input_tokens: 100,
      cached_tokens: 0,
      output_tokens: 8,
      overlapped: false,
      preemptions: 0,
    });
    const records = [record(1, 2), record(0, 1), record(1, 4), record(-1, 0)];
    const workers = runMetrics(records).per_instance;
    expect(workers.map((w) => [w.instance, w.requests])).toEqual([
      [0, 1],
      [1, 2],
    ]);
    expect(workers[0]!.ttft_p90_s).toBeCloseTo(1, 9);
    expect(workers[1]!.ttft_p90_s).toBeCloseTo(3.8, 9); // linear between 2 and 4, as run-metrics.ts
  });

  it('shows the run and says which figures need a sweep', () => {
    const run = report([fixture.records]);
    expect(run.status).toBe(0);
    const out = fixture.records.replace(/\.msgpack$/, '.html');
    expect(run.stderr).toContain(`wrote ${out}`);
    const html = readFileSync(out, 'utf8');
    const single = ['latency', 'per-worker-ttft', 'slow-causes'];
    for (const id of single) expect(html).toContain(`data-figure="${id}"`);
    for (const id of ALL_FIGURES.filter((f) => !single.includes(f))) expect(html).toContain(`data-omitted="${id}"`);
    // The slow column counts what `kvroute analyze run` counts (it read "n/a").
    const analysis = spawnSync(process.execPath, [CLI, 'analyze', 'run', fixture.records, '--json', '--skip-reuse'], {
      encoding: 'utf8',
    });
    const nSlow = (JSON.parse(analysis.stdout) as { slow: { n_slow: number } }).slow.n_slow;
    expect(html).toMatch(new RegExp(`<td class="num">${nSlow}</td></tr>`));
    expect(html).not.toContain('<td class="num">n/a</td>');
    expect(html).not.toContain('tr class="best"'); // one run: nothing to call best
    // Provenance from the record file's header: the trace, the command, the version.
    expect(html).toContain('<code>t.jsonl</code>');
    expect(html).toMatch(/kvroute sim run --trace t\.jsonl --policy sticky/);
    expect(readFileSync(out.replace(/\.html$/, '.md'), 'utf8')).toContain('**APC against hotspot index**: fewer than');
  });
});

describe('kvroute report refuses bad input, naming the file (exit 1)', () => {
  it('a missing path, an empty directory, a directory without sweep.json', () => {
    const missing = report([join(fixture.dir, 'nope')]);
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain(`kvroute report: ${join(fixture.dir, 'nope')}: missing`);
    const empty = join(fixture.dir, 'empty');
    mkdirSync(empty);
    const noSweep = report([empty]);
    expect(noSweep.status).toBe(1);
    expect(noSweep.stderr).toContain(`${join(empty, 'sweep.json')}: missing: ${empty} is not a sweep directory`);
    const cells = report([join(fixture.dir, 'cells')]);
    expect(cells.status).toBe(1);
    expect(cells.stderr).toContain(join(fixture.dir, 'cells', 'sweep.json'));
  });

  it('a sweep.json naming missing files, or with a bad field, or not JSON', () => {
    const dir = variant('missing', (sweep) => {
      (sweep.cells as { summary: string }[])[1]!.summary = 'cells/gone/summary.json';
    });
    const run = report([dir]);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`${join(dir, 'cells/gone/summary.json')}: missing`);
    const noTraceSummary = variant('no-trace-summary', (sweep) => {
      sweep.trace_summary = 'gone.json';
    });
    expect(report([noTraceSummary]).stderr).toContain(`${join(noTraceSummary, 'gone.json')}: missing`);
    const badField = variant('bad-field', (sweep) => {
      (sweep.cells as { policy: unknown }[])[0]!.policy = 7;
    });
    const bad = report([badField]);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain(`${join(badField, 'sweep.json')}: cells[0].policy: must be a non-empty string, got 7`);
    const newer = variant('newer', (sweep) => {
      sweep.format = 'kvroute-sweep';
      sweep.version = 2;
    });
    expect(report([newer]).stderr).toContain('sweep version 2 is newer than this kvroute reads (1)');
    const badReuse = variant('bad-reuse', () => {});
    const summaryPath = join(badReuse, 'cells', 'lmetric', 'summary.json');
    writeFileSync(
      summaryPath,
      JSON.stringify({
        ...JSON.parse(readFileSync(summaryPath, 'utf8')),
        reuse: { fractions: { intra_session: 'x' } },
      }),
    );
    expect(report([badReuse]).stderr).toContain(
      `${summaryPath}: reuse.fractions.intra_session: must be a finite number`,
    );
    const noCells = variant('no-cells', (sweep) => {
      sweep.cells = [];
    });
    expect(report([noCells]).stderr).toContain('cells: empty');
    writeFileSync(join(noCells, 'sweep.json'), '{"trace":');
    const notJson = report([noCells]);
    expect(notJson.status).toBe(1);
    expect(notJson.stderr).toContain(`${join(noCells, 'sweep.json')}: not JSON`);
  });

  it('a file that is not a record file', () => {
    const run = report([join(fixture.dir, 't.jsonl')]);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('t.jsonl');
  });
});

describe('the report in headless Chromium', () => {
  it('shows every figure with data marks and a non-empty box', async () => {
    const out = join(fixture.dir, 'browser.html');
    await buildReport(fixture.dir, out, 'test');
    let browser: Browser | undefined;
    try {
      browser = await launchBrowser();
      const page = await newPage(browser, { viewport: { width: 1200, height: 900 } });
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(String(error)));
      page.on('request', (r) => {
        if (!r.url().startsWith('file:')) pageErrors.push(`fetched ${r.url()}`);
      });
      await page.goto(pathToFileURL(out).href, { waitUntil: 'load' });
      const figures = await page.evaluate(() =>
        [...document.querySelectorAll('figure[data-figure]')].map((f) => {
          const svg = f.querySelector('svg');
          const box = svg?.getBoundingClientRect();
          return {
            id: f.getAttribute('data-figure'),
            marks: f.querySelectorAll('svg g.role-mark > path, svg g.role-mark > line, svg g.role-mark > text').length,
            width: box?.width ?? 0,
            height: box?.height ?? 0,
            caption: f.querySelector('figcaption')?.getBoundingClientRect().height ?? 0,
          };
        }),
      );
      expect(figures.map((f) => f.id)).toEqual(ALL_FIGURES.filter((f) => f !== 'slow-causes'));
      for (const f of figures) {
        expect(f.marks, `${f.id}: data marks`).toBeGreaterThan(0);
        expect(f.width, `${f.id}: width`).toBeGreaterThan(100);
        expect(f.height, `${f.id}: height`).toBeGreaterThan(50);
        expect(f.caption, `${f.id}: caption`).toBeGreaterThan(0);
      }
      const shot = process.env.KVROUTE_REPORT_SCREENSHOT;
      if (shot) await page.screenshot({ path: shot, fullPage: true });
      expect(pageErrors).toEqual([]);
    } finally {
      await browser?.close();
    }
  });
});
