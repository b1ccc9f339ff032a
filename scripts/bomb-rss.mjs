#!/usr/bin/env node
/**
 * Compression bombs against a real `kvroute serve`, measured from outside: the proxy's resident
 * memory (VmRSS of its process) before, at the peak of, and after bursts of concurrent brotli
 * bodies that each inflate far past --max-body, in front of simulated engines on loopback.
 *
 *   node scripts/bomb-rss.mjs [--http uws|node] [--bombs 40] [--rounds 2] [--inflate-mib 256]
 *                             [--max-body-memory 128MiB]
 *
 * Needs `npm run build` (dist/ and the addon). Every child it starts is stopped by pid at the end;
 * every wait is bounded. Prints one table row per round and the answers' statuses.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { clearInterval, setInterval, setTimeout } from 'node:timers';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { brotliCompressSync, constants } from 'node:zlib';

const { values } = parseArgs({
  options: {
    http: { type: 'string', default: 'uws' },
    bombs: { type: 'string', default: '40' },
    rounds: { type: 'string', default: '2' },
    'inflate-mib': { type: 'string', default: '256' },
    'max-body-memory': { type: 'string', default: '128MiB' },
    'settle-ms': { type: 'string', default: '8000' },
  },
});
const bombs = Number(values.bombs);
const rounds = Number(values.rounds);
const settleMs = Number(values['settle-ms']);
const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const MODEL = 'qwen3-coder-30b-a3b';
const MIB = 2 ** 20;
const { AbortSignal } = globalThis;

/**
 * Starts `node dist/cli.js ...args`; resolves with the child and the first stdout match of `pattern`.
 * @param {string[]} args
 * @param {RegExp} pattern
 * @returns {Promise<{ child: import('node:child_process').ChildProcess, found: RegExpMatchArray }>}
 */
function start(args, pattern, timeoutMs = 30_000) {
  const child = spawn(process.execPath, [cli, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stderr.on('data', (c) => (err += c));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`no ${pattern} within ${timeoutMs} ms: ${out}${err}`)), timeoutMs);
    const fail = (/** @type {Error} */ error) => {
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(error);
    };
    child.once('exit', (code) => fail(new Error(`${args.join(' ')} exited (${code}): ${out}${err}`)));
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const found = out.match(pattern);
      if (found === null) return;
      clearTimeout(timer);
      child.removeAllListeners('exit');
      resolve({ child, found });
    });
  });
}

/**
 * Stops a child by pid: SIGTERM, then SIGKILL after 5 s.
 * @param {import('node:child_process').ChildProcess} child
 * @returns {Promise<void>}
 */
function stop(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((/** @type {(value?: void) => void} */ resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

const rssMiB = (/** @type {number} */ pid) => {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
  return line === null ? NaN : Number(line[1]) / 1024;
};

/** The lowest RSS seen over `ms` after a burst (sampled every 100 ms): what stays resident. */
async function settledRss(/** @type {number} */ pid, /** @type {number} */ ms) {
  let low = rssMiB(pid);
  for (const end = Date.now() + ms; Date.now() < end;) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    low = Math.min(low, rssMiB(pid));
  }
  return low;
}

const engines = await start(
  ['sim', 'serve', '--instances', '2', '--port', '0'],
  /(http:\/\/127\.0\.0\.1:\d+)[\s\S]*(http:\/\/127\.0\.0\.1:\d+)/,
);
const urls = [engines.found[1], engines.found[2]];
let proxy;
try {
  proxy = await start(
    [
      'serve',
      '--backends',
      urls.join(','),
      '--port',
      '0',
      '--host',
      '127.0.0.1',
      '--http',
      values.http,
      '--max-body-memory',
      values['max-body-memory'],
    ],
    /listening on (http:\/\/[\d.]+:\d+)/,
  );
  const base = proxy.found[1];
  const pid = /** @type {number} */ (proxy.child.pid);
  // One plain request first: the proxy is warm and its backends healthy before the baseline.
  for (let tries = 0; ; tries++) {
    const r = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 }),
    });
    await r.arrayBuffer();
    if (r.status === 200) break;
    if (tries >= 50) throw new Error(`the proxy never answered 200 (last ${r.status})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const json = Buffer.from(
    JSON.stringify({
      model: MODEL,
      messages: [{ role: 'user', content: 'x'.repeat(Number(values['inflate-mib']) * MIB) }],
    }),
  );
  const bomb = brotliCompressSync(json, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } });
  console.log(
    `machine: ${process.platform} ${process.arch}, node ${process.version}; kvroute serve --http ${values.http} --max-body-memory ${values['max-body-memory']} (max-body 64MiB)`,
  );
  console.log(
    `bomb: ${bomb.length} bytes of brotli inflating to ${(json.length / MIB).toFixed(0)} MiB; ${bombs} at once, ${rounds} rounds`,
  );
  console.log('| round | RSS before (MiB) | RSS peak (MiB) | RSS after (MiB) | answers |');
  console.log('| --- | --- | --- | --- | --- |');
  for (let round = 1; round <= rounds; round++) {
    const before = rssMiB(pid);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMiB(pid))), 10);
    const statuses = await Promise.all(
      Array.from({ length: bombs }, () =>
        fetch(`${base}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'content-encoding': 'br' },
          body: bomb,
          signal: AbortSignal.timeout(120_000),
        }).then(
          async (r) => (await r.arrayBuffer(), r.status),
          (error) => `error ${error.name}`,
        ),
      ),
    );
    clearInterval(sampler);
    peak = Math.max(peak, rssMiB(pid));
    const after = await settledRss(pid, settleMs);
    /** @type {Record<string, number>} */
    const counts = {};
    for (const s of statuses) counts[s] = (counts[s] ?? 0) + 1;
    const answers = Object.entries(counts)
      .map(([s, n]) => `${n}×${s}`)
      .join(', ');
    console.log(`| ${round} | ${before.toFixed(0)} | ${peak.toFixed(0)} | ${after.toFixed(0)} | ${answers} |`);
  }
} finally {
  if (proxy !== undefined) await stop(proxy.child);
  await stop(engines.child);
}
