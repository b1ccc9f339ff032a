// After `node-gyp rebuild`: the node-gyp build and the cmake-js build must
// compile the same native/ sources, load, and make identical decisions. Each
// routes in its own process, chosen with KVROUTE_ADDON; the loader reports which
// file it actually loaded.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

// The two source lists: every native/*.cc named in CMakeLists.txt (but the plain C++ test,
// benchmark and fuzz targets, which only cmake builds), and binding.gyp's "sources".
const cmakeSources = new Set(
  (readFileSync(`${root}CMakeLists.txt`, 'utf8').match(/native\/[\w/.-]+\.cc/g) ?? []).filter(
    (s) => !['native/test/', 'native/bench/', 'native/fuzz/'].some((room) => s.startsWith(room)),
  ),
);
/** @type {{ targets: { sources: string[] }[] }} */
const gyp = JSON.parse(readFileSync(`${root}binding.gyp`, 'utf8'));
const gypSources = new Set(gyp.targets.flatMap((t) => t.sources).filter((s) => s.startsWith('native/')));
const onlyCmake = [...cmakeSources].filter((s) => !gypSources.has(s));
const onlyGyp = [...gypSources].filter((s) => !cmakeSources.has(s));
for (const s of [...cmakeSources, ...gypSources]) {
  if (!existsSync(`${root}${s}`)) {
    console.error(`check-gyp-parity: ${s} is listed but does not exist`);
    process.exit(1);
  }
}
if (onlyCmake.length > 0 || onlyGyp.length > 0) {
  console.error(
    `check-gyp-parity: the source lists differ: only in CMakeLists.txt [${onlyCmake.join(', ')}], ` +
      `only in binding.gyp [${onlyGyp.join(', ')}]`,
  );
  process.exit(1);
}
const builds = {
  'node-gyp': `${root}build/Release/kvroute.node`,
  'cmake-js': `${root}build-cmake/Release/kvroute.node`,
};

/** @type {Record<string, string>} */
const digests = {};
for (const [name, path] of Object.entries(builds)) {
  if (!existsSync(path)) {
    console.error(`check-gyp-parity: the ${name} build is missing (${path})`);
    process.exit(1);
  }
  const run = spawnSync(process.execPath, [`${root}scripts/route-digest.mjs`], {
    encoding: 'utf8',
    env: { ...process.env, KVROUTE_ADDON: path },
  });
  if (run.status !== 0) {
    console.error(`check-gyp-parity: routing with the ${name} build failed:\n${run.stderr}`);
    process.exit(1);
  }
  const { addon, digest } = JSON.parse(run.stdout);
  if (addon !== path) {
    console.error(`check-gyp-parity: asked for the ${name} build (${path}) but ${addon} was loaded`);
    process.exit(1);
  }
  digests[name] = digest;
}
if (digests['node-gyp'] !== digests['cmake-js']) {
  console.error(`check-gyp-parity: the builds decide differently: ${JSON.stringify(digests)}`);
  process.exit(1);
}
console.log(
  `check-gyp-parity: node-gyp and cmake-js builds make identical decisions (${String(digests['node-gyp']).slice(0, 16)}…)`,
);
