/**
 * `kvroute report DIR` on a policy evaluation directory (scripts/policy-eval.mjs): the tables
 * hold each regime's mean TTFT p90 per policy with the lowest marked, the figure has one mark
 * per (regime, policy), a real Chromium shows it, and malformed files are refused naming the
 * file and the field. A file of issue #28 (`--set generalization`: a variant row, `targets`,
 * `setups`) adds its targets table and how each regime ran.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import type { Browser } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';

import { launchBrowser, newPage } from './helpers/browser.js';

// The page's DOM, as far as the browser check reads it (the project compiles without lib "dom").
interface PageNode {
  getAttribute(name: string): string | null;
  querySelector(selector: string): { getBoundingClientRect(): { width: number; height: number } } | null;
  querySelectorAll(selector: string): { length: number };
}
declare const document: { querySelectorAll(selector: string): Iterable<PageNode> };

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

const run = (seed: number, ttft: number) => ({ seed, ttft_p90: ttft, apc: 0.7, hotspot: 1.5 });
const EVALUATION = {
  seeds: [11, 12],
  policies: ['lmetric', 'sticky', 'min_ttft'],
  cells: {
    default: {
      lmetric: [run(11, 5), run(12, 6)],
      sticky: [run(11, 6), run(12, 6)],
      min_ttft: [run(11, 4), run(12, 5)],
    },
    'rate 2×': {
      lmetric: [run(11, 5), run(12, 5)],
      sticky: [run(11, 9), run(12, 7)],
      min_ttft: [run(11, 6), run(12, 6)],
    },
  },
};

function evaluationDir(files: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), 'kvroute-eval-'));
  dirs.push(dir);
  for (const [name, value] of Object.entries(files))
    writeFileSync(join(dir, name), typeof value === 'string' ? value : JSON.stringify(value));
  return dir;
}

const report = (dir: string) => spawnSync(process.execPath, [CLI, 'report', dir], { encoding: 'utf8' });

describe('kvroute report on a policy evaluation directory', () => {
  it('tabulates each regime’s mean TTFT p90 per policy, the lowest marked, and draws one point per cell', () => {
    const dir = evaluationDir({ 'regimes-seeds-11-12.json': EVALUATION });
    const result = report(dir);
    expect(result.stderr).toContain('1 evaluation figures');
    expect(result.status).toBe(0);
    const md = readFileSync(join(dir, 'report.md'), 'utf8');
    expect(md).toContain('| default | 5.50 | 6.00 | **4.50** |');
    expect(md).toContain('| rate 2× | **5.00** | 8.00 | 6.00 |');
    const html = readFileSync(join(dir, 'report.html'), 'utf8');
    expect(html).toContain('<table data-set="regimes">');
    expect(html.match(/aria-roledescription="point"/g)).toHaveLength(6);
    expect(html).not.toMatch(/<script|https?:\/\/(?!www\.w3\.org)/);
  });

  it.each([
    ['not JSON', '{', /regimes-seeds-1\.json: not JSON/],
    [
      'a missing policy',
      { ...EVALUATION, policies: ['lmetric', 'absent'] },
      /cells\.default\.absent: must be an array/,
    ],
    [
      'a run without its TTFT',
      {
        ...EVALUATION,
        cells: { default: { ...EVALUATION.cells.default, lmetric: [{ seed: 1, apc: 0.5, hotspot: 1 }] } },
      },
      /cells\.default\.lmetric\[0\]\.ttft_p90: must be a finite number/,
    ],
    ['no regimes', { ...EVALUATION, cells: {} }, /cells: must be at least one regime/],
  ])('refuses %s, naming the file and the field', (_name, content, message) => {
    const dir = evaluationDir({ 'regimes-seeds-1.json': content });
    const result = report(dir);
    expect(result.status).toBe(1);
    expect(result.stderr).toMatch(message);
  });

  it('shows every figure with data marks and a non-empty box in headless Chromium', async () => {
    const dir = evaluationDir({ 'regimes-seeds-11-12.json': EVALUATION, 'perturbations-seeds-11-12.json': EVALUATION });
    expect(report(dir).status).toBe(0);
    let browser: Browser | undefined;
    try {
      browser = await launchBrowser();
      const page = await newPage(browser, { viewport: { width: 1200, height: 900 } });
      await page.goto(pathToFileURL(join(dir, 'report.html')).href, { waitUntil: 'load' });
      const figures = await page.evaluate(() =>
        [...document.querySelectorAll('figure[data-figure]')].map((f) => {
          const box = f.querySelector('svg')?.getBoundingClientRect();
          return {
            id: f.getAttribute('data-figure'),
            marks: f.querySelectorAll('svg g.role-mark > path').length,
            width: box?.width ?? 0,
            height: box?.height ?? 0,
          };
        }),
      );
      expect(figures.map((f) => f.id)).toEqual(['perturbations', 'regimes']);
      for (const f of figures) {
        expect(f.marks).toBe(6);
        expect(f.width).toBeGreaterThan(100);
        expect(f.height).toBeGreaterThan(50);
      }
    } finally {
      await browser?.close();
    }
  });

  it('renders a generalization file: the variant as a column, the targets table and each regime’s setup', () => {
    const mean = (policy: string, ttft: number, apc = 0.7, hotspot = 1.5) => ({ policy, ttft_p90: ttft, apc, hotspot });
    const generalization = {
      seeds: [1],
      policies: ['lmetric', 'unified', 'min_ttft', 'min_ttft (fixed costs)'],
      variants: [{ name: 'min_ttft (fixed costs)', policy: 'min_ttft', sweep: ['--costs', 'fixed'] }],
      cells: {
        '2-class fleet': {
          lmetric: [run(1, 6)],
          unified: [run(1, 7)],
          min_ttft: [run(1, 4)],
          'min_ttft (fixed costs)': [run(1, 5)],
        },
      },
      setups: {
        '2-class fleet': {
          '1': { trace: 'kvroute trace synth --seed 1', sweep: ['--fleet', '4,4:prefill=0.5:decode=0.7'] },
        },
      },
      targets: {
        '2-class fleet': {
          default: mean('min_ttft', 4),
          rank: 1,
          of: 4,
          best_other: mean('min_ttft (fixed costs)', 5),
          best_existing: mean('min_ttft (fixed costs)', 5),
          best_apc: 0.7,
          unified: mean('unified', 7),
          pass: { best: true, existing: true, apc: true, hotspot: true },
        },
      },
    };
    const dir = evaluationDir({ 'generalization-seeds-1.json': generalization });
    const result = report(dir);
    expect(result.status, result.stderr).toBe(0);
    const md = readFileSync(join(dir, 'report.md'), 'utf8');
    expect(md).toContain('| TTFT p90 (s) | lmetric | unified | min_ttft | min_ttft (fixed costs) |');
    expect(md).toContain('| 2-class fleet | 6.00 | 7.00 | **4.00** | 5.00 |');
    expect(md).toContain(
      '| 2-class fleet | 4.00 | 1 of 4 | min_ttft (fixed costs) 5.00 | −20.0% ✓ | min_ttft (fixed costs) 5.00 | −20.0% ✓ | 70.0% / 70.0% ✓ | 1.50 / 1.50 ✓ |',
    );
    expect(md).toContain(
      '- ≥ 10% below the best existing policy (mixed fleets, misstated costs): met in 1 of 1 regimes',
    );
    expect(md).toContain(
      '- 2-class fleet, seed 1: `kvroute trace synth --seed 1`; sweep `--fleet 4,4:prefill=0.5:decode=0.7`',
    );
    const html = readFileSync(join(dir, 'report.html'), 'utf8');
    expect(html).toContain('<table data-targets="generalization">');
    expect(html).toContain('<td>−20.0% ✓</td>');

    const broken = {
      ...generalization,
      targets: { '2-class fleet': { ...generalization.targets['2-class fleet'], pass: { best: 'yes' } } },
    };
    const refused = report(evaluationDir({ 'generalization-seeds-1.json': broken }));
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/targets\.2-class fleet\.pass\.best: must be true or false/);
  });
});
