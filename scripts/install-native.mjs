// npm's `install` step for kvroute: use the prebuilt addon the package ships
// when it loads on this machine, else compile it from source.
//
// The npm package carries prebuilds/<platform>-<arch>/kvroute.node (made by
// prebuildify in `prepack`, from binding.gyp; check-gyp-parity holds that build
// to the cmake-js one). A consumer on such a machine needs no compiler, CMake or
// network for the addon. Anywhere else (another platform, musl, an old glibc),
// and in the development checkout (a .git beside package.json: a prebuild left
// by an interrupted `npm pack` is never used there), this runs the cmake-js
// build exactly as `npm run build:native` does. KVROUTE_BUILD_FROM_SOURCE=1
// (or npm's --build-from-source) skips the prebuild. src/core/native.ts searches
// the source builds first, then the prebuild.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);
const prebuild = join(root, 'prebuilds', `${process.platform}-${process.arch}`, 'kvroute.node');
const fromSource =
  process.env.KVROUTE_BUILD_FROM_SOURCE === '1' ||
  process.env.npm_config_build_from_source === 'true' ||
  existsSync(join(root, '.git'));

/** Why the prebuild cannot be used here, or null when it loads. */
function prebuildProblem() {
  if (!existsSync(prebuild)) return 'none shipped for this platform';
  try {
    const addon = require(prebuild);
    return typeof addon.NativeRouter === 'function' ? null : 'it loads but exports no NativeRouter';
  } catch (error) {
    return /** @type {Error} */ (error).message.split('\n')[0];
  }
}

const problem = fromSource ? 'a build from source was asked for, or this is the checkout' : prebuildProblem();
if (problem === null) {
  console.log(`kvroute: using the prebuilt addon ${prebuild}`);
  process.exit(0);
}
if (existsSync(prebuild)) console.log(`kvroute: not using the prebuilt addon (${problem}); building from source`);
const cmakeJs = join(require.resolve('cmake-js/package.json'), '..', 'bin', 'cmake-js');
const build = spawnSync(process.execPath, [cmakeJs, 'compile', '--out', 'build-cmake'], {
  cwd: root,
  stdio: 'inherit',
});
if (build.error) throw build.error;
process.exit(build.status ?? 1);
