#!/usr/bin/env node
// @ts-check
/**
 * The live replica experiment of docs/scale-out.md ("Measured live"): `kvroute replay` of an
 * agentic trace through haproxy (round robin, HTTP mode) in front of R `kvroute serve` replicas,
 * against the same replay through one replica. The single replica subscribes to every `sim serve`
 * engine's KV events (ZeroMQ, with replay). The R replicas join one load plane on a local
 * nats-server (`--cluster`) and, with `--events nats` (the default), read the engines' events from
 * its JetStream stream, which one `kvroute events relay` fills from the engines' sockets; with
 * `--events zmq` each subscribes to every engine itself. Mid-run one replica is killed (SIGKILL)
 * and restarted on its port; the script measures how long its event-fed index takes to hold 95%
 * of a peer's blocks.
 *
 *   node scripts/replica-live.mjs [--replicas 3] [--sessions 30] [--duration 120] [--speed 10]
 *     [--seed 3] [--kill-at 0.4] [--engines 4] [--events nats|zmq]
 *
 * Needs `npm run build`, Debian's nats-server and haproxy. Prints one JSON object: the single
 * replica's and the R replicas' APC, TTFT p90, instances per session and failed requests, the
 * load plane's delta messages per request, and the restarted replica's warm-up. Every process it
 * starts is stopped by pid before it exits.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { haproxyConfig } from './lib/haproxy-config.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli.js');
const TOKEN = 'replica-live-admin-token';
const { values } = parseArgs({
  options: {
    replicas: { type: 'string', default: '3' },
    sessions: { type: 'string', default: '30' },
    duration: { type: 'string', default: '120' },
    speed: { type: 'string', default: '10' },
    seed: { type: 'string', default: '3' },
    'kill-at': { type: 'string', default: '0.4' },
    engines: { type: 'string', default: '4' },
    events: { type: 'string', default: 'nats' },
  },
});
const fail = (/** @type {string} */ m) => {
  process.stderr.write(`replica-live: ${m}\n`);
  process.exit(2);
};
const replicas = Number(values.replicas);
const engines = Number(values.engines);
const killAt = Number(values['kill-at']);
if (!(Number.isInteger(replicas) && replicas >= 2 && replicas <= 8)) fail('--replicas must be an integer from 2 to 8');
if (!(Number.isInteger(engines) && engines >= 1 && engines <= 16)) fail('--engines must be an integer from 1 to 16');
if (!(killAt > 0 && killAt < 1)) fail('--kill-at must be a fraction of the run in (0, 1)');
const viaNats = values.events === 'nats';
if (!viaNats && values.events !== 'zmq')
  fail('--events must be nats (through a relay) or zmq (every replica to every engine)');
const which = (/** @type {string} */ name) =>
  ['/usr/sbin', '/usr/bin'].map((d) => join(d, name)).find((p) => existsSync(p));
const natsBinary = which('nats-server');
const haproxyBinary = which('haproxy');
if (natsBinary === undefined) fail('nats-server is not installed (Debian package nats-server)');
if (haproxyBinary === undefined) fail('haproxy is not installed (Debian package haproxy)');
if (!existsSync(cli)) fail(`${cli} is missing: run npm run build first`);

const work = mkdtempSync(join(tmpdir(), 'kvroute-replica-live-'));
/** @type {Set<import('node:child_process').ChildProcess>} */
const children = new Set();
const cleanup = () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
};
process.on('exit', cleanup);
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) process.on(signal, () => process.exit(130));

/** @param {string[]} args */
function kvroute(args) {
  const r = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (r.status !== 0) throw new Error(`kvroute ${args.join(' ')} failed (${r.status}):\n${r.stderr}`);
  return r.stdout;
}

/** @returns {Promise<number>} */
const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => resolve(typeof a === 'object' && a !== null ? a.port : 0));
    });
  });

/** Whether `port` can be listened on now. @param {number} port @returns {Promise<boolean>} */
const portFree = (port) =>
  new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });

/**
 * A first port of `n` consecutive free ones, none in `avoid` (`sim serve` binds engine i's
 * sockets on PORT+i, so every one of the range must be free, not only the first).
 * @param {number} n @param {Set<number>} avoid
 */
async function freeRange(n, avoid = new Set()) {
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const first = await freePort();
    const range = Array.from({ length: n }, (_, i) => first + i);
    if (range.some((p) => avoid.has(p) || p > 65535)) continue;
    if ((await Promise.all(range.map(portFree))).every(Boolean)) {
      for (const p of range) avoid.add(p);
      return first;
    }
  }
  throw new Error(`no ${n} consecutive free ports`);
}

/** @param {number} port */
async function listening(port, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const ok = await new Promise((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port });
      socket.once('connect', () => (socket.destroy(), resolve(true)));
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on ${port} after ${ms} ms`);
}

/**
 * @param {string} command @param {string[]} args
 * @param {(line: string) => boolean} [ready] resolves once a stdout line satisfies it
 */
function start(command, args, ready) {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  /** @type {string[]} */
  const lines = [];
  let stderr = '';
  child.stderr?.on('data', (d) => (stderr = (stderr + d).slice(-8000)));
  const up = new Promise((resolve, reject) => {
    if (ready === undefined) return resolve(undefined);
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')}: not ready in 60 s\n${stderr}`)), 60_000);
    child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}\n${stderr}`)));
    createInterface({ input: /** @type {import('node:stream').Readable} */ (child.stdout) }).on('line', (line) => {
      lines.push(line);
      if (ready(line)) {
        clearTimeout(timer);
        resolve(undefined);
      }
    });
  });
  return { child, lines, up, stderr: () => stderr };
}

/** @param {import('node:child_process').ChildProcess} child */
const stop = (child, signal = /** @type {NodeJS.Signals} */ ('SIGTERM')) =>
  new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(undefined);
    child.once('exit', resolve);
    child.kill(signal);
  });

/** @param {string} base */
async function adminState(base) {
  const res = await fetch(`${base}/admin/state`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return /** @type {any} */ (await res.json());
}

/** Blocks the replica's event-fed indexes hold, over every engine. @param {string} base */
async function eventBlocks(base) {
  const state = await adminState(base);
  return state.router.instances.reduce(
    (/** @type {number} */ sum, /** @type {any} */ s) => sum + (s.kvEvents?.engineBlocks ?? 0),
    0,
  );
}

/** @param {string} base */
async function deltaMessages(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(/^kvroute_cluster_messages_published_total\{kind="delta"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

const trace = join(work, 'trace.jsonl');
kvroute([
  'trace',
  'synth',
  '--sessions',
  values.sessions,
  '--duration',
  values.duration,
  '--seed',
  values.seed,
  '-o',
  trace,
]);

/** One cell: R replicas (1 = the single router) behind haproxy. @param {number} count */
async function cell(count) {
  const taken = new Set();
  const kvPort = await freeRange(engines, taken);
  const replayPort = await freeRange(engines, taken);
  const simArgs = [cli, 'sim', 'serve', '--instances', String(engines), '--port', '0', '--speed', values.speed];
  simArgs.push('--tokenizer', 'qwen3', '--kv-events', String(kvPort), '--kv-events-replay', String(replayPort));
  const sim = start(process.execPath, simArgs, (line) => line.startsWith('http://'));
  await sim.up;
  while (sim.lines.filter((l) => l.startsWith('http://')).length < engines) await new Promise((r) => setTimeout(r, 20));
  const urls = sim.lines.filter((l) => l.startsWith('http://')).slice(0, engines);
  /** @type {ReturnType<typeof start> | undefined} */
  let nats;
  let natsUrl = '';
  if (count > 1) {
    const port = await freePort();
    const store = join(work, `nats-${count}`);
    nats = start(/** @type {string} */ (natsBinary), ['-js', '-sd', store, '-a', '127.0.0.1', '-p', String(port)]);
    await listening(port);
    natsUrl = `nats://127.0.0.1:${port}`;
  }
  const kvEvents = urls.map((_, i) => `tcp://127.0.0.1:${kvPort + i}`).join(',');
  const kvReplay = urls.map((_, i) => `tcp://127.0.0.1:${replayPort + i}`).join(',');
  /** @type {ReturnType<typeof start> | undefined} */
  let relay;
  if (count > 1 && viaNats) {
    const relayArgs = [cli, 'events', 'relay', '--nats', `${natsUrl}/live`, '--backends', urls.join(',')];
    relayArgs.push('--kv-events', kvEvents, '--kv-replay', kvReplay, '--stats-interval', '0');
    relay = start(process.execPath, relayArgs);
    for (let t = 0; !relay.stderr().includes('into stream'); t += 1) {
      if (t > 400 || relay.child.exitCode !== null) throw new Error(`the relay did not start:\n${relay.stderr()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  const ports = await Promise.all(Array.from({ length: count }, freePort));
  const serveArgs = (/** @type {number} */ k) => {
    const args = [cli, 'serve', '--backends', urls.join(','), '--port', String(ports[k]), '--policy', 'min_ttft'];
    // The R replicas' events through the relay's stream (the cluster's fleet, `live`), or direct.
    if (count > 1 && viaNats) args.push('--events', natsUrl);
    else args.push('--kv-events', kvEvents, '--kv-replay', kvReplay);
    args.push('--tokenizer', 'qwen3', '--admin-token', TOKEN, '--reconcile-interval', '0');
    if (count > 1) {
      const config = join(work, `cluster-${k}.yaml`);
      writeFileSync(config, `cluster:\n  nats: ${natsUrl}\n  fleet: live\n  replica: replica-${k}\n`);
      args.push('--config', config);
    }
    return args;
  };
  const serves = [];
  for (let k = 0; k < count; k += 1)
    serves.push(start(process.execPath, serveArgs(k), (l) => l.includes('listening on')));
  await Promise.all(serves.map((s) => s.up));
  const bases = ports.map((p) => `http://127.0.0.1:${p}`);
  const haproxyPort = await freePort();
  const config = join(work, `haproxy-${count}.cfg`);
  writeFileSync(
    config,
    haproxyConfig(
      haproxyPort,
      ports.map((p) => `127.0.0.1:${p}`),
      '/ready',
    ),
  );
  const haproxy = start(/** @type {string} */ (haproxyBinary), ['-db', '-q', '-f', config]);
  await listening(haproxyPort);
  // Every replica ready (backends probed) before the replay starts.
  for (const base of bases)
    for (let t = 0; t < 200; t += 1) {
      const ok = await fetch(`${base}/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      await new Promise((r) => setTimeout(r, 50));
    }
  await new Promise((r) => setTimeout(r, 1000)); // haproxy's checks rise (2 × 200 ms)
  const records = join(work, `run-${count}.msgpack`);
  const replayArgs = [cli, 'replay', '--trace', trace, '--target', `http://127.0.0.1:${haproxyPort}`];
  replayArgs.push('--records', records, '--speed', values.speed, '--no-hash-ids');
  const began = Date.now();
  const replay = start(process.execPath, replayArgs);
  /** @type {{ killed_at_s: number, warm_ms: number | null, blocks: number, peer_blocks: number } | undefined} */
  let restart;
  if (count > 1) {
    const expectedMs = (Number(values.duration) / Number(values.speed)) * 1000;
    await new Promise((r) => setTimeout(r, expectedMs * killAt));
    await stop(/** @type {ReturnType<typeof start>} */ (serves[0]).child, 'SIGKILL');
    const killedAt = (Date.now() - began) / 1000;
    await new Promise((r) => setTimeout(r, 500));
    const again = start(process.execPath, serveArgs(0), (l) => l.includes('listening on'));
    await again.up;
    serves[0] = again;
    const startedAt = Date.now();
    let warm = null;
    let blocks = 0;
    let peer = 0;
    while (Date.now() - startedAt < 30_000) {
      [blocks, peer] = await Promise.all([eventBlocks(`${bases[0]}`), eventBlocks(`${bases[1]}`)]).catch(() => [0, 1]);
      if (peer > 0 && blocks >= 0.95 * peer) {
        warm = Date.now() - startedAt;
        break;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    restart = { killed_at_s: killedAt, warm_ms: warm, blocks, peer_blocks: peer };
  }
  const code = await new Promise((resolve) => replay.child.once('exit', resolve));
  if (code !== 0) throw new Error(`replay exited ${code}:\n${replay.stderr()}`);
  const deltas = count > 1 ? (await Promise.all(bases.map(deltaMessages))).reduce((a, b) => a + b, 0) : 0;
  await stop(haproxy.child);
  await Promise.all(serves.map((s) => stop(s.child)));
  if (relay !== undefined) await stop(relay.child);
  if (nats !== undefined) await stop(nats.child);
  await stop(sim.child);
  const analysis = JSON.parse(kvroute(['analyze', 'run', records, '--json']));
  return {
    replicas: count,
    requests: analysis.requests,
    failed: analysis.failed,
    apc: analysis.apc,
    ttft_p90_s: analysis.ttft_s?.p90,
    instances_per_session: analysis.instances_per_session,
    ...(count > 1 ? { delta_messages_per_request: deltas / analysis.requests, restart } : {}),
  };
}

const single = await cell(1);
const split = await cell(replicas);
process.stdout.write(
  `${JSON.stringify(
    {
      trace: `trace synth --sessions ${values.sessions} --duration ${values.duration} --seed ${values.seed}`,
      engines,
      events: viaNats ? 'engines → events relay → JetStream → replicas' : 'every replica to every engine (ZeroMQ)',
      speed: Number(values.speed),
      single,
      split,
      apc_points: (split.apc - single.apc) * 100,
      ttft_p90_ratio: split.ttft_p90_s / single.ttft_p90_s,
      instances_per_session_ratio: split.instances_per_session / single.instances_per_session,
    },
    null,
    2,
  )}\n`,
);
process.exit(0);
