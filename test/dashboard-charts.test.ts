/**
 * The dashboard's two charts (src/proxy/dashboard/page-script.ts) show something from the first
 * frame (issue 29: they started empty, their legends reading "Time: --"): in headless Chromium,
 * once the first frame is in, the request-rate chart has drawn its sample (pixels of its series
 * colour on the canvas), each legend shows the newest sample's time and value instead of "--",
 * and the TTFT chart, with no first token yet, says so in a note over the chart.
 */
import type { Browser } from 'playwright-core';
import { describe, expect, it } from 'vitest';

import { createDashboard } from '../src/proxy/observe/dashboard/dashboard.js';
import { createProxy, type Proxy } from '../src/proxy/server/proxy-server.js';
import { launchBrowser, newPage } from './helpers/browser.js';

/** The page's DOM, as much as the function run in the browser uses (tsconfig has no DOM lib). */
interface Canvas {
  width: number;
  height: number;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } };
}
declare const document: { querySelector(selector: string): (Canvas & { textContent: string | null }) | null };

describe('the dashboard charts', () => {
  it('show the first frame: a drawn sample, the newest values in the legends, a note where there is none', async () => {
    let proxy: Proxy | undefined;
    let browser: Browser | undefined;
    const dashboard = createDashboard();
    try {
      // No engine needs to answer: the page's first frame comes on connect.
      proxy = createProxy({
        backends: ['http://127.0.0.1:9'],
        observers: [dashboard.observer],
        mounts: [dashboard.mount],
      });
      const { port } = await proxy.listen(0, '127.0.0.1');
      browser = await launchBrowser();
      const page = await newPage(browser, { viewport: { width: 1280, height: 900 } });
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(String(error)));
      page.setDefaultTimeout(15_000);
      await page.goto(`http://127.0.0.1:${port}/`, { waitUntil: 'load' });
      await page.waitForFunction(() => document.querySelector('#requests-total')?.textContent === '0');

      const rateLegend = (await page.textContent('#chart-rate .u-legend')) ?? '';
      expect(rateLegend).not.toContain('--');
      expect(rateLegend).toMatch(/req\/s\s*0\.0/);
      const ttftLegend = (await page.textContent('#chart-ttft .u-legend')) ?? '';
      expect(ttftLegend).not.toContain('--');
      expect(await page.isVisible('#chart-rate .u-legend')).toBe(true);
      expect(await page.textContent('#chart-ttft .chart-note')).toBe('no first token in the window yet');
      expect(await page.isVisible('#chart-rate .chart-note')).toBe(false);
      // No --max-in-flight, no rate limit, no request: the tenants panel says flow control is off.
      expect(await page.getAttribute('#tenants-panel', 'data-state')).toBe('off');
      expect(await page.textContent('#tenants tr.empty')).toMatch(/^flow control off/);

      // The rate chart's one sample is on the canvas: pixels of its series colour (#2f6fde).
      const drawn = await page.evaluate(() => {
        const canvas = document.querySelector('#chart-rate canvas')!;
        const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
        let n = 0;
        for (let i = 0; i < data.length; i += 4)
          if (
            Math.abs(data[i]! - 0x2f) < 24 &&
            Math.abs(data[i + 1]! - 0x6f) < 24 &&
            Math.abs(data[i + 2]! - 0xde) < 24
          )
            n++;
        return n;
      });
      expect(drawn).toBeGreaterThan(0);
      const shot = process.env.KVROUTE_DASHBOARD_SCREENSHOT;
      if (shot) await page.screenshot({ path: shot.replace(/(\.png)?$/, '-first-frame.png'), fullPage: true });
      expect(pageErrors).toEqual([]);
    } finally {
      await browser?.close();
      dashboard.close();
      await proxy?.close({ graceMs: 0 });
    }
  }, 60_000);
});
