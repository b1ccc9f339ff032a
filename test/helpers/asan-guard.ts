/**
 * vitest setup file of the ASan/UBSan addon leg (vitest.asan.config.ts, run by
 * scripts/asan-addon-test.sh; docs/sanitizers.md). It runs in every forked worker before its test
 * file and fails the file unless this very process routes through the sanitized addon: the
 * loader must have picked $KVROUTE_ADDON, and the process must map both the ASan runtime and that
 * file. Without it, an environment that failed to reach the forks (or a loader that fell back to
 * build-cmake) would pass the leg while testing nothing.
 */
import { readFileSync, realpathSync } from 'node:fs';

import { nativePath } from '../../src/core/native.js';

const wanted = process.env.KVROUTE_ADDON;
if (wanted === undefined || wanted === '') {
  throw new Error('asan leg: KVROUTE_ADDON is not set in this worker; the environment did not reach the fork');
}
const loaded = nativePath();
if (loaded !== wanted) {
  throw new Error(`asan leg: the loader picked ${String(loaded)}, not KVROUTE_ADDON=${wanted}`);
}
const maps = readFileSync('/proc/self/maps', 'utf8');
if (!/\/libasan\.so[.\d]*$/m.test(maps)) {
  throw new Error('asan leg: this worker does not map the ASan runtime (LD_PRELOAD did not reach it)');
}
if (!maps.includes(realpathSync(wanted))) {
  throw new Error(`asan leg: this worker does not map ${wanted}`);
}
