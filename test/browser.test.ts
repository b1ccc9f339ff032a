/**
 * The browser the npm package ships (@sparticuz/chromium) launches and renders on this machine,
 * whether or not Debian's chromium is installed: a fresh machine with no apt step runs the
 * dashboard and report tests on it (test/helpers/browser.ts).
 */
import { describe, expect, it } from 'vitest';

import { launchBrowser, newPage } from './helpers/browser.js';

describe("the npm package's Chromium", () => {
  it('launches and runs a page', async () => {
    const browser = await launchBrowser('npm');
    try {
      const page = await newPage(browser);
      await page.setContent('<p id="x">kvroute</p><script>document.title = String(6 * 7);</script>');
      expect(await page.textContent('#x')).toBe('kvroute');
      expect(await page.title()).toBe('42');
    } finally {
      await browser.close();
    }
  }, 60_000);
});
