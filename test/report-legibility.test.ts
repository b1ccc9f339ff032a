/**
 * The report reads at a glance (issue 29): rendered in headless Chromium at 1400 px wide, from
 * the shipped example sweep (docs/example-report/sweep-1, ten runs) and from a copy with two
 * runs more (twelve, past the ten colours of Vega's default scheme):
 * - every run has its own colour in the figures;
 * - no two texts of a figure overlap, and every text renders at 11 px or more;
 * - the runs table fits inside its card (and at 800 px scrolls inside it, the card on the
 *   page); the best run is highlighted with its criterion;
 * - the ES ablation table is there, with the verdicts `kvroute sweep` wrote to tables.md.
 * A full-page screenshot goes to a temporary directory (KVROUTE_REPORT_SCREENSHOT names a file
 * to keep it), to look at.
 */
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildReport } from '../src/report/build-report.js';
import { loadReportInput } from '../src/report/report-input.js';
import { BEST_RUN_CRITERION, bestRunId, runColours } from '../src/report/run-style.js';
import { launchBrowser, newPage } from './helpers/browser.js';

const EXAMPLE = fileURLToPath(new URL('../docs/example-report/sweep-1', import.meta.url));

/** The page's DOM, as much as the functions run in the browser use (tsconfig has no DOM lib). */
interface Rect {
  left: number;
  right: number;
  top: number;
  bottom: number;
  width: number;
}
interface El {
  textContent: string | null;
  clientWidth: number;
  scrollWidth: number;
  getAttribute(name: string): string | null;
  getBoundingClientRect(): Rect;
  querySelector(selector: string): El | null;
  querySelectorAll(selector: string): Iterable<El>;
}
declare const document: El;
declare function getComputedStyle(el: El): { fontSize: string; opacity: string; overflowX: string };

interface FigureFacts {
  id: string;
  /** Distinct fill colours of the data marks. */
  fills: string[];
  /** The smallest rendered text, px: font size × the SVG's on-page scale. */
  minFontPx: number;
  /** Pairs of texts whose boxes overlap, as "a / b". */
  overlaps: string[];
}

interface PageFacts {
  figures: FigureFacts[];
  table: { right: number; cardRight: number; cardScroll: number; cardClient: number };
  bestRow: string | null;
  bestNote: string | null;
  verdicts: [string, string][];
  /** The runs card at 800 px wide: its right edge, and how it treats a wider table. */
  narrow?: { cardRight: number; overflowX: string };
}

let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'kvroute-legible-'));
  // Twelve runs: the example's ten and a second sticky pair on the same records.
  const twelve = join(dir, 'sweep-12');
  cpSync(EXAMPLE, twelve, { recursive: true });
  const path = join(twelve, 'sweep.json');
  const sweep = JSON.parse(readFileSync(path, 'utf8')) as { cells: Record<string, string>[] };
  for (const state of ['shadow', 'shm'])
    sweep.cells.push({
      ...sweep.cells.find((c) => c.id === `sticky-${state}`)!,
      id: `sticky2-${state}`,
      policy: 'sticky2',
    });
  writeFileSync(path, JSON.stringify(sweep));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** Renders the report of `input` and reads what a reader would see at 1400 px. */
async function look(input: string, name: string): Promise<PageFacts> {
  const out = join(dir, `${name}.html`);
  await buildReport(input, out, 'test');
  let browser: Browser | undefined;
  try {
    browser = await launchBrowser();
    const page = await newPage(browser, { viewport: { width: 1400, height: 1000 } });
    const errors: string[] = [];
    page.on('pageerror', (error) => errors.push(String(error)));
    await page.goto(pathToFileURL(out).href, { waitUntil: 'load' });
    const shot = process.env.KVROUTE_REPORT_SCREENSHOT
      ? process.env.KVROUTE_REPORT_SCREENSHOT.replace(/(\.png)?$/, `-${name}.png`)
      : join(dir, `${name}.png`);
    await page.screenshot({ path: shot, fullPage: true });
    const facts = await page.evaluate((): PageFacts => {
      const overlap = (a: Rect, b: Rect): boolean =>
        Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1 &&
        Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
      const figures = [...document.querySelectorAll('figure[data-figure]')].map((figure) => {
        const svg = figure.querySelector('svg')!;
        const scale = svg.getBoundingClientRect().width / Number(svg.getAttribute('width'));
        const texts = [...svg.querySelectorAll('text')].filter(
          (t) => (t.textContent ?? '').trim() !== '' && getComputedStyle(t).opacity !== '0',
        ); // Vega hides a colliding axis label with opacity 0
        const boxes = texts.map((t) => ({ text: t.textContent!, box: t.getBoundingClientRect() }));
        const overlaps: string[] = [];
        for (let i = 0; i < boxes.length; i++)
          for (let j = i + 1; j < boxes.length; j++)
            if (overlap(boxes[i]!.box, boxes[j]!.box)) overlaps.push(`${boxes[i]!.text} / ${boxes[j]!.text}`);
        const fills = new Set<string>();
        for (const mark of svg.querySelectorAll('g.role-mark path')) {
          const fill = mark.getAttribute('fill');
          if (fill !== null && fill !== 'none' && fill !== 'transparent') fills.add(fill);
        }
        return {
          id: figure.getAttribute('data-figure')!,
          fills: [...fills],
          minFontPx: Math.min(...texts.map((t) => parseFloat(getComputedStyle(t).fontSize) * scale)),
          overlaps,
        };
      });
      const card = document.querySelector('#runs-card')!;
      return {
        figures,
        table: {
          right: document.querySelector('#runs')!.getBoundingClientRect().right,
          cardRight: card.getBoundingClientRect().right,
          cardScroll: card.scrollWidth,
          cardClient: card.clientWidth,
        },
        bestRow: document.querySelector('#runs tr.best td')?.textContent ?? null,
        bestNote: document.querySelector('#best-run')?.textContent ?? null,
        verdicts: [...document.querySelectorAll('#es-ablation tbody tr')].map((tr) => [
          tr.querySelector('td')!.textContent!,
          tr.querySelector('td[data-verdict]')!.getAttribute('data-verdict')!,
        ]),
      };
    });
    // A narrower window: the runs table scrolls inside its card, the card stays on the page.
    await page.setViewportSize({ width: 800, height: 1000 });
    facts.narrow = await page.evaluate(() => {
      const card = document.querySelector('#runs-card')!;
      return { cardRight: card.getBoundingClientRect().right, overflowX: getComputedStyle(card).overflowX };
    });
    expect(errors).toEqual([]);
    return facts;
  } finally {
    await browser?.close();
  }
}

/** The ES verdicts of tables.md, as `kvroute sweep` wrote them: [policy, verdict] per row. */
function tablesMdVerdicts(sweepDir: string): [string, string][] {
  const md = readFileSync(join(sweepDir, 'tables.md'), 'utf8');
  const section = md.slice(md.indexOf('## ES ablation'));
  return section
    .split('\n')
    .filter((line) => /^\| [^-]/.test(line) && !line.startsWith('| policy'))
    .map((line) => {
      const cells = line.split('|').map((c) => c.trim());
      return [cells[1]!, cells[6]!];
    });
}

function expectLegible(facts: PageFacts, runs: number): void {
  for (const f of facts.figures) {
    expect(f.overlaps, `${f.id}: overlapping texts`).toEqual([]);
    expect(f.minFontPx, `${f.id}: smallest text (px)`).toBeGreaterThanOrEqual(11);
  }
  for (const id of ['apc-hotspot', 'per-worker-ttft', 'apc-ceiling']) {
    const figure = facts.figures.find((f) => f.id === id)!;
    const runFills = figure.fills.filter((fill) => runColours(runs).includes(fill));
    expect(new Set(runFills).size, `${id}: a colour per run`).toBe(runs);
  }
  expect(facts.table.right).toBeLessThanOrEqual(facts.table.cardRight);
  expect(facts.table.cardScroll).toBeLessThanOrEqual(facts.table.cardClient);
  expect(facts.narrow!.cardRight).toBeLessThanOrEqual(800);
  expect(['auto', 'scroll']).toContain(facts.narrow!.overflowX); // the table scrolls inside the card
}

describe('the report at 1400 px', () => {
  it('the example sweep: legible, the best run highlighted, the ES verdicts of tables.md', async () => {
    const facts = await look(EXAMPLE, 'example');
    expectLegible(facts, 10);
    const best = bestRunId(loadReportInput(EXAMPLE).cells)!;
    expect(best).toBe('sticky-shm'); // TTFT p90 6.82 s, the lowest in tables.md
    expect(facts.bestRow).toBe(best);
    expect(facts.bestNote).toContain(BEST_RUN_CRITERION);
    expect(facts.verdicts).toEqual(tablesMdVerdicts(EXAMPLE));
    expect(facts.verdicts).toContainEqual(['sticky', 'HELPS']);
    expect(facts.verdicts).toContainEqual(['load_only', 'HURTS']);
  }, 90_000);

  it('twelve runs: twelve colours, still legible', async () => {
    const facts = await look(join(dir, 'sweep-12'), 'twelve');
    expect(new Set(runColours(12)).size).toBe(12);
    expectLegible(facts, 12);
    expect(facts.verdicts.map(([policy]) => policy)).toContain('sticky2');
  }, 90_000);
});
