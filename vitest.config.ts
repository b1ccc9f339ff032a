import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Native addons and worker threads: one forked process per file.
    pool: 'forks',
    testTimeout: 120_000,
    hookTimeout: 60_000,
    // Unpacks the npm-shipped Chromium once, before the files run in parallel (test/helpers/browser.ts).
    globalSetup: ['test/helpers/browser-setup.ts'],
  },
});
