// @ts-check
// Workload (issue #32): `kvroute events relay` throughput, engine → relay → JetStream.
// An engine process (bench/lib/event-relay-publisher.mjs) sends the kv-events workload's vLLM
// stream (16-token blocks, stored runs of 1–64, ~30% removals) over ZeroMQ as fast as it can;
// this process runs the relay (dist/events/nats/event-relay.js) into a real nats-server's
// JetStream (file storage) and times it from its first message to NATS's last acknowledgement.
// Reported: block events (stored + removed blocks) per second of wall time, and per CPU-second
// of this process (user + system): the relay's cost per core, its NATS client included, the
// engine's and the server's excluded. Target: >= 1M block events/s per core.
// Skipped, saying so, without nats-server (Debian's package; .ci/run installs it).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';

import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';

import { EventRelay } from '../dist/events/nats/event-relay.js';
import { workloadMain } from './lib/cli.mjs';
import { generateKvEventStream } from './lib/kv-event-workload.mjs';

/**
 * @typedef {{
 *   workload: 'event-relay', kind: 'event-relay', messages: number, block_events: number, bytes: number,
 *   wall_events_per_s: number, cpu_events_per_s: number, cpu_seconds: number, wall_seconds: number,
 *   stored_messages: number, resets: number, load_avg: number,
 * }} EventRelayResult
 */

const binary = [
  '/usr/sbin/nats-server',
  '/usr/bin/nats-server',
  ...(process.env.PATH ?? '').split(':').map((d) => join(d, 'nats-server')),
].find((p) => existsSync(p));

/** @returns {Promise<number>} */
const freePort = () =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        address !== null && typeof address === 'object' ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });

const sleep = (/** @type {number} */ ms) => new Promise((r) => setTimeout(r, ms));

workloadMain('event-relay', async ({ quick }) => {
  if (binary === undefined) {
    console.log('  skipped: nats-server is not installed (Debian package nats-server)');
    return [];
  }
  const blockEventsWanted = quick ? 200_000 : 2_000_000;
  const stream = generateKvEventStream(blockEventsWanted);
  const messages = stream.payloads.length;
  const bytes = stream.payloads.reduce((n, p) => n + p.length, 0);
  const store = mkdtempSync(join(tmpdir(), 'kvroute-bench-nats-'));
  const port = await freePort();
  const nats = spawn(binary, ['-js', '-a', '127.0.0.1', '-p', String(port), '-sd', store], { stdio: 'ignore' });
  /** @type {import('node:child_process').ChildProcess | undefined} */
  let engine;
  /** @type {EventRelay | undefined} */
  let relay;
  try {
    const server = `nats://127.0.0.1:${port}`;
    for (let k = 0; ; k++) {
      try {
        const nc = await connect({ servers: [server], timeout: 500 });
        await nc.close();
        break;
      } catch (error) {
        if (k > 100) throw error;
        await sleep(50);
      }
    }
    engine = spawn(
      process.execPath,
      [join(import.meta.dirname, 'lib/event-relay-publisher.mjs'), String(blockEventsWanted), 'tcp://127.0.0.1:*'],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    const lines = createInterface({ input: /** @type {import('node:stream').Readable} */ (engine.stdout) });
    const endpoint = await new Promise((resolve, reject) => {
      lines.once('line', (line) => (line.startsWith('bound ') ? resolve(line.slice(6)) : reject(new Error(line))));
      engine?.once('exit', (code) => reject(new Error(`the engine exited (${code})`)));
    });
    relay = EventRelay.start({
      server,
      fleet: 'bench',
      engines: [{ engine: 'http://127.0.0.1:1', endpoint: /** @type {string} */ (endpoint) }],
      maxAgeMs: 3_600_000,
      maxBytes: 8 * 2 ** 30,
      log: () => {},
    });
    await relay.ready;
    // Timed from the first message the relay takes to the last acknowledgement.
    while (relay.stats().engines[0]?.published === 0) await new Promise((r) => setTimeout(r, 0));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const deadline = Date.now() + 300_000;
    while (relay.stats().acknowledged + relay.stats().failed < messages) {
      if (Date.now() > deadline)
        throw new Error(`the relay acknowledged ${relay.stats().acknowledged} of ${messages} in 300 s`);
      await sleep(2);
    }
    const wallSeconds = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(cpu0);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const stats = relay.stats();
    const nc = await connect({ servers: [server] });
    const info = await (await jetstreamManager(nc)).streams.info('KVROUTE_bench_EVENTS');
    await nc.close();
    /** @type {EventRelayResult} */
    const result = {
      workload: 'event-relay',
      kind: 'event-relay',
      messages,
      block_events: stream.blockEvents,
      bytes,
      wall_events_per_s: Math.round(stream.blockEvents / wallSeconds),
      cpu_events_per_s: Math.round(stream.blockEvents / cpuSeconds),
      cpu_seconds: Math.round(cpuSeconds * 1000) / 1000,
      wall_seconds: Math.round(wallSeconds * 1000) / 1000,
      stored_messages: info.state.messages,
      resets: stats.engines[0]?.resets ?? 0,
      load_avg: Math.round((loadavg()[0] ?? 0) * 100) / 100,
    };
    console.log(
      `  ${messages.toLocaleString('en-US')} messages, ${stream.blockEvents.toLocaleString('en-US')} block events relayed in ${result.wall_seconds} s ` +
        `(${result.cpu_seconds} CPU-s): ${(result.wall_events_per_s / 1e6).toFixed(2)}M/s wall, ${(result.cpu_events_per_s / 1e6).toFixed(2)}M/s per core; ` +
        `stream holds ${result.stored_messages.toLocaleString('en-US')}, ${stats.failed} failed, ${result.resets} resets`,
    );
    if (result.stored_messages !== messages || stats.failed !== 0)
      throw new Error(`the stream holds ${result.stored_messages} of ${messages} messages (${stats.failed} failed)`);
    return [result];
  } finally {
    await relay?.close();
    engine?.kill('SIGKILL');
    nats.kill('SIGTERM');
    await new Promise((r) => (nats.exitCode === null ? nats.once('exit', r) : r(null)));
    rmSync(store, { recursive: true, force: true });
  }
});
