// The packed package installs and runs without a compiler (`npm run test:pack`,
// and .ci/run before the tests).
//
// Packs this checkout (`npm pack`: prepare builds dist/, prepack makes the
// prebuilt addon with prebuildify, postpack removes it again), checks that the
// tarball carries prebuilds/<platform>-<arch>/kvroute.node, then installs the
// tarball into an empty temporary project whose PATH holds only node, npm, npx
// and sh: no compiler, no CMake, no make. In that project it imports kvroute,
// routes a request with the native addon (asserting the prebuild is the one
// loaded), starts a proxy on loopback in front of two simulated engines, and
// sends it one chat completion. Needs the npm registry for the dependencies.
//
// Hazards: every process it starts is waited for or stopped by pid; the
// temporary folder is removed unless KVROUTE_KEEP_PACK_CHECK=1, and so is a
// prebuilds/ folder a failed pack left in the checkout.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'kvroute-pack-check-'));
// postpack removes the prebuild npm pack made; a pack that failed half-way leaves it: removed below too.
const hadPrebuilds = existsSync(join(root, 'prebuilds'));
const prebuildEntry = `package/prebuilds/${process.platform}-${process.arch}/kvroute.node`;
/** @type {import('node:child_process').ChildProcess | undefined} */
let running;

/**
 * Runs a command to completion (output inherited unless `options` says); throws naming it when it fails.
 * @param {string} command
 * @param {string[]} args
 * @param {import('node:child_process').SpawnSyncOptions} [options]
 */
function run(command, args, options) {
  const result = spawnSync(command, args, { stdio: 'inherit', ...options });
  if (result.error) throw result.error;
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')} exited with ${result.status ?? result.signal}`);
  return result;
}

/** A directory of symlinks to node, npm, npx and sh (npm runs install scripts with it) only: the consumer's whole PATH. */
function bareBin() {
  const bin = join(work, 'bin');
  mkdirSync(bin);
  for (const tool of ['node', 'npm', 'npx', 'sh']) {
    const found = spawnSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).stdout.trim();
    if (!found) throw new Error(`${tool} is not on PATH`);
    symlinkSync(found, join(bin, tool));
  }
  for (const compiler of ['cc', 'c++', 'g++', 'gcc', 'clang', 'cmake', 'make']) {
    const leak = spawnSync('sh', ['-c', `PATH=${bin} command -v ${compiler}`], { encoding: 'utf8' }).stdout.trim();
    if (leak) throw new Error(`the bare PATH still finds ${compiler} (${leak})`);
  }
  return bin;
}

const consumerCheck = `
import { Router, nativePath } from 'kvroute';
import { createProxy } from 'kvroute/proxy';
import { startSimFleet } from 'kvroute/sim';

const expected = process.argv[2];
const router = new Router({ instances: 2, policy: 'min_ttft' });
const ticket = router.route({ prompt: 'You are a helpful assistant. Hello there.', session: 'pack-check' });
const { instance, reason } = router.decision;
if (typeof instance !== 'string') throw new Error('the router chose no instance');
router.complete(ticket);
if (nativePath() !== expected) throw new Error('loaded the addon from ' + nativePath() + ', not the prebuild ' + expected);
console.log('routed to ' + instance + ' (' + reason + ') with ' + nativePath());

const fleet = await startSimFleet({ instances: 2, port: 0, model: 'pack-check' });
const proxy = createProxy({ backends: fleet.urls });
try {
  const { port } = await proxy.listen(0, '127.0.0.1');
  const response = await fetch('http://127.0.0.1:' + port + '/v1/chat/completions', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'pack-check', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }),
  });
  const body = await response.text();
  if (response.status !== 200) throw new Error('the proxy answered ' + response.status + ': ' + body);
  console.log('served one request on 127.0.0.1:' + port + ': ' + body.slice(0, 80));
} finally {
  await proxy.close({ graceMs: 1000 });
  await fleet.close();
}
`;

async function main() {
  const packDir = join(work, 'pack');
  mkdirSync(packDir);
  console.log(`pack-install-check: npm pack into ${packDir}`);
  run('npm', ['pack', '--pack-destination', packDir], { cwd: root });
  const tarball = join(packDir, readdirSync(packDir).find((f) => f.endsWith('.tgz')) ?? 'missing.tgz');
  const listing = run('tar', ['-tzf', tarball], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' }).stdout;
  if (!String(listing).split('\n').includes(prebuildEntry)) throw new Error(`the tarball has no ${prebuildEntry}`);

  const project = join(work, 'consumer');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  writeFileSync(join(project, 'check.mjs'), consumerCheck);
  /** @type {NodeJS.ProcessEnv} */
  const env = { ...process.env, PATH: bareBin() };
  for (const key of Object.keys(env)) if (key.startsWith('npm_')) delete env[key]; // not this run's npm settings
  console.log('pack-install-check: npm install of the tarball with only node, npm, npx and sh on PATH');
  run('npm', ['install', '--no-audit', '--no-fund', tarball], { cwd: project, env });

  const prebuild = join(project, 'node_modules', 'kvroute', prebuildEntry.slice('package/'.length));
  running = spawn(process.execPath, ['check.mjs', prebuild], { cwd: project, env, stdio: 'inherit' });
  const [code, signal] = await new Promise((resolve) => running?.once('exit', (c, s) => resolve([c, s])));
  running = undefined;
  if (code !== 0) throw new Error(`the consumer check exited with ${code ?? signal}`);
  console.log('pack-install-check: the packed tarball installs without a compiler, imports, routes and serves');
}

try {
  await main();
} catch (error) {
  console.error(`pack-install-check: ${/** @type {Error} */ (error).message}`);
  process.exitCode = 1;
} finally {
  if (running?.pid !== undefined && running.exitCode === null) process.kill(running.pid, 'SIGKILL');
  if (!hadPrebuilds) rmSync(join(root, 'prebuilds'), { recursive: true, force: true });
  if (process.env.KVROUTE_KEEP_PACK_CHECK === '1') console.log(`pack-install-check: kept ${work}`);
  else rmSync(work, { recursive: true, force: true });
}
