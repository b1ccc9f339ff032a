/**
 * The ASan/UBSan addon leg's vitest configuration (scripts/asan-addon-test.sh, docs/sanitizers.md):
 * the project's own, plus a setup file that fails a test file unless its worker loaded the
 * sanitized addon under the preloaded ASan runtime, and without the Chromium unpacking (no browser
 * test runs in this leg).
 */
import { defineConfig, mergeConfig } from 'vitest/config';

import base from './vitest.config.js';

export default mergeConfig(
  { ...base, test: { ...base.test, globalSetup: [] } },
  defineConfig({
    test: {
      setupFiles: ['test/helpers/asan-guard.ts'],
    },
  }),
);
