/**
 * The event plane over a real nats-server (docs/scale-out.md, "One event plane over NATS"):
 * engines' ZeroMQ KV events (sim's publisher, vLLM's framing and replay) relayed by EventRelay into
 * the fleet's JetStream stream, and routers fed from it by subscribeNatsKvEvents. Covered: events
 * reach a replica; a replica started later is warm from the retained stream; a relay restarted
 * repairs its downtime from the engine's replay buffer (no reset), or, when the buffer no longer
 * holds it, says so with a reset marker the replica rebuilds from; an engine restart; NATS down at
 * a replica's start; a replica started before any relay; NATS restarted mid-run; a replica
 * stalled while events flow (a slow consumer) loses nothing; a stream listed without the relay's
 * ready marker is not read where nats-server exits on a read mid-creation. Skipped, saying so, when
 * nats-server is absent.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { Router } from '../src/core/router.js';
import { EventRelay } from '../src/events/nats/event-relay.js';
import { eventStreamName, eventSubjects } from '../src/events/nats/event-subjects.js';
import { subscribeNatsKvEvents } from '../src/events/nats/nats-kv-event-subscription.js';
import { fleetStreamNames, readyStreamName, streamCreateRaceAffected } from '../src/events/nats/stream-ready.js';
import { KvEventPublisher } from '../src/sim/kv-event-publisher.js';
import type { PublishedKvEvent } from '../src/sim/kv-event-encoding.js';
import { NATS_SKIP_REASON, natsServerPath, startNatsServer, type NatsServer } from './helpers/nats-server.js';

const binary = natsServerPath();
if (binary === undefined) console.warn(`test/event-plane.test.ts: ${NATS_SKIP_REASON}`);

const ENGINE = 'http://10.0.0.1:8000';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: () => boolean, ms = 10_000, why = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${why}`);
    await sleep(10);
  }
}

/** One root block of 16 unique tokens per id: an index that applied id k holds its key. */
const stored = (id: number): PublishedKvEvent[] => [
  {
    type: 'BlockStored',
    blockHashes: [id],
    parentBlockHash: null,
    tokenIds: Array.from({ length: 16 }, (_, i) => id * 16 + i),
    blockSize: 16,
  },
];

const open: Array<{ close(): unknown }> = [];

/**
 * Whether the server's JetStream API answers (`$JS.API.INFO`) within 10 s. Asked after each test's
 * clients closed: CI saw a shared server stop answering JetStream calls at the start of a test
 * (5 × 10 s), so each test now has its own server, and one that hung is reported with its stacks.
 */
async function jetStreamAnswers(url: string): Promise<boolean> {
  const { connect } = await import('@nats-io/transport-node');
  const nc = await connect({ servers: [url], timeout: 5_000 });
  try {
    await nc.request('$JS.API.INFO', undefined, { timeout: 10_000 });
    return true;
  } catch {
    return false;
  } finally {
    await nc.close();
  }
}

describe.skipIf(binary === undefined)('the event plane over NATS JetStream', () => {
  let nats: NatsServer;
  let fleetNo = 0;
  let fleet = '';
  // What the relays said; printed with the server's state when a test fails.
  let relayLogs: string[] = [];
  // Each test its own server and fleet (so its own stream): no test depends on another's state.
  beforeEach(async ({ onTestFailed }) => {
    relayLogs = [];
    nats = await startNatsServer();
    onTestFailed(async () => {
      console.error(`relays' log:\n${relayLogs.join('\n')}\n\n${await nats.diagnose()}`);
    });
  });
  afterEach(async ({ task }) => {
    fleetNo++;
    for (const o of open.splice(0).reverse()) await o.close();
    try {
      if (!(await jetStreamAnswers(nats.url)))
        console.error(
          `test/event-plane.test.ts: after "${task.name}" the nats-server no longer answers JetStream API calls\n${await nats.diagnose()}`,
        );
    } finally {
      await nats.dispose();
    }
  });
  const nextFleet = () => (fleet = `t${fleetNo}`);

  async function engine(bufferSteps = 10_000): Promise<KvEventPublisher> {
    const pub = await KvEventPublisher.start({
      endpoint: 'tcp://127.0.0.1:*',
      replayEndpoint: 'tcp://127.0.0.1:*',
      encoding: 'map',
      bufferSteps,
    });
    open.push(pub);
    return pub;
  }

  function relay(pub: KvEventPublisher, logs: string[] = relayLogs): EventRelay {
    const r = EventRelay.start({
      server: nats.url,
      fleet,
      engines: [{ engine: ENGINE, endpoint: pub.endpoint, replay: pub.replayEndpoint }],
      maxAgeMs: 3_600_000,
      maxBytes: 64 * 2 ** 20,
      log: (line) => {
        logs.push(line);
        if (logs !== relayLogs) relayLogs.push(line);
      },
    });
    open.push(r);
    return r;
  }

  function replica(warnings: string[] = []): {
    router: Router;
    events: () => NonNullable<ReturnType<Router['stats']>['instances'][0]['kvEvents']>;
  } {
    const router = new Router({ instances: [ENGINE], native: true, onWarning: (w) => warnings.push(w) });
    subscribeNatsKvEvents(router, ENGINE, { server: nats.url, fleet });
    open.push(router);
    return { router, events: () => router.stats().instances[0]!.kvEvents! };
  }

  /** Publishes ids [from, to) and, once the relay has taken the first, the rest in order. */
  async function publishUntilRelayed(pub: KvEventPublisher, r: EventRelay, ids: number[]): Promise<void> {
    // A SUB socket misses what precedes its joining (the relay's replay fills what a later
    // message shows missing): wait for the connection, and a moment for the subscription.
    await r.ready;
    await until(() => r.stats().engines[0]?.connected === true, 10_000, 'the relay to connect');
    await sleep(200);
    const start = r.stats().engines[0]!.published;
    for (const id of ids) pub.publish(stored(id));
    await until(
      () => r.stats().engines[0]!.published - start >= ids.length || r.stats().engines[0]!.resets > 0,
      10_000,
      'the relay to publish',
    );
  }

  it('relays events to a replica, and a replica started later is warm from the retained stream', async () => {
    nextFleet();
    const pub = await engine();
    const r = relay(pub);
    const first = replica();
    await publishUntilRelayed(
      pub,
      r,
      Array.from({ length: 40 }, (_, id) => id),
    );
    await until(() => first.events().heldKeys === 40, 10_000, 'the first replica to hold 40 blocks');
    expect(first.events()).toMatchObject({ state: 'live', fed: true, gaps: 0, rebuilds: 0, malformed: 0 });
    expect(r.stats()).toMatchObject({ failed: 0 });
    expect(r.stats().engines[0]).toMatchObject({ published: 40, resets: 0 });

    const started = Date.now();
    const late = replica();
    await until(() => late.events().fed, 5_000, 'the late replica to be fed');
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(late.events()).toMatchObject({ state: 'live', heldKeys: 40, engineBlocks: 40, rebuilds: 0 });
    // Both see what comes next.
    pub.publish([{ type: 'BlockRemoved', blockHashes: [0, 1] }]);
    await until(() => first.events().heldKeys === 38 && late.events().heldKeys === 38, 10_000, 'the removal');
  });

  it("repairs a relay's downtime from the engine's replay buffer, with no reset", async () => {
    nextFleet();
    const pub = await engine();
    const logs: string[] = [];
    const r1 = relay(pub, logs);
    const rep = replica();
    await publishUntilRelayed(pub, r1, [0, 1, 2, 3, 4]);
    await until(() => rep.events().heldKeys === 5);
    await r1.close();
    for (let id = 5; id < 15; id++) pub.publish(stored(id)); // nobody relays these
    const r2 = relay(pub, logs);
    await r2.ready;
    for (let k = 0; k < 500 && rep.events().heldKeys < 16; k++) {
      pub.publish(stored(100 + k));
      await sleep(10);
    }
    await until(() => rep.events().heldKeys >= 16);
    const e = rep.events();
    // Ids 5..14 came from the engine's replay: the replica holds every block, rebuilt nothing.
    expect(e.heldKeys).toBe(15 + (pub.seq - 15));
    expect(e).toMatchObject({ rebuilds: 0, gaps: 0, restarts: 0 });
    expect(r2.stats().engines[0]).toMatchObject({ replays: 1, replayFailures: 0, resets: 0 });
  });

  it("marks a reset when the engine's buffer no longer holds the downtime, and the replica rebuilds", async () => {
    nextFleet();
    const pub = await engine(4);
    const logs: string[] = [];
    const r1 = relay(pub, logs);
    const rep = replica();
    await publishUntilRelayed(pub, r1, [0, 1, 2]);
    await until(() => rep.events().heldKeys === 3);
    await r1.close();
    for (let id = 3; id < 13; id++) pub.publish(stored(id)); // 10 messages; the buffer keeps 4
    const r2 = relay(pub, logs);
    await r2.ready;
    await until(() => r2.stats().engines[0]?.connected === true, 10_000, 'the relay to connect');
    await sleep(200);
    pub.publish(stored(13));
    await until(() => rep.events().rebuilds === 1 && rep.events().heldKeys >= 1, 10_000, 'the rebuild');
    await sleep(200);
    // The reset emptied the index; the partial replay (ids 10..12, what the buffer held before
    // seq 13) and id 13 started it again. Ids 0..9 are forgotten, as the engine's truth is unknown.
    expect(rep.events().heldKeys).toBe(4);
    expect(r2.stats().engines[0]).toMatchObject({ replays: 1, replayFailures: 1, resets: 1 });
    expect(logs.join('\n')).toMatch(/reset marker \(gap\)/);
  });

  it('marks an engine restart, and the replica drops the old engine’s blocks', async () => {
    nextFleet();
    const first = await engine();
    const endpoint = first.endpoint;
    const replay = first.replayEndpoint!;
    const r = EventRelay.start({
      server: nats.url,
      fleet,
      engines: [{ engine: ENGINE, endpoint, replay }],
      maxAgeMs: 3_600_000,
      maxBytes: 64 * 2 ** 20,
      log: (line) => relayLogs.push(line),
    });
    open.push(r);
    const rep = replica();
    await publishUntilRelayed(first, r, [0, 1, 2, 3]);
    await until(() => rep.events().heldKeys === 4);
    await first.close();
    // The engine comes back on the same endpoints, numbering from 0 again.
    // ZeroMQ frees a closed socket's port in its I/O thread, a moment after close(): bind again until it is free.
    let second: KvEventPublisher | undefined;
    for (let tries = 0; second === undefined; tries++) {
      try {
        second = await KvEventPublisher.start({ endpoint, replayEndpoint: replay, encoding: 'map' });
      } catch (error) {
        if (!/in use/i.test((error as Error).message) || tries >= 40) throw error;
        await sleep(50);
      }
    }
    open.push(second);
    for (let k = 0; k < 500 && rep.events().restarts === 0; k++) {
      second.publish(stored(1000 + k));
      await sleep(10);
    }
    await until(() => rep.events().restarts === 1 && rep.events().heldKeys > 0);
    await sleep(100);
    expect(rep.events().heldKeys).toBe(second.seq);
    expect(r.stats().engines[0]!.resets).toBe(1);
  });

  it('a replica started while NATS is down routes on its belief index, then joins', async () => {
    nextFleet();
    await nats.stop();
    const warnings: string[] = [];
    const rep = replica(warnings);
    await sleep(1_500);
    expect(rep.events()).toMatchObject({ fed: false, state: 'connecting' });
    expect(warnings.join('\n')).toMatch(/cannot reach NATS .*routing on the belief index/);
    await nats.restart();
    const pub = await engine();
    const r = relay(pub);
    await publishUntilRelayed(pub, r, [0, 1, 2, 3, 4]);
    await until(() => rep.events().fed && rep.events().heldKeys === 5, 15_000, 'the replica to join');
  });

  it('a replica started before any relay waits for the stream, saying so, then reads it', async () => {
    nextFleet();
    const warnings: string[] = [];
    const rep = replica(warnings);
    await until(
      () => warnings.some((w) => /cannot read stream KVROUTE_t\d+_EVENTS .*kvroute events relay/.test(w)),
      10_000,
      'the warning',
    );
    expect(rep.events().fed).toBe(false);
    const pub = await engine();
    const r = relay(pub);
    await publishUntilRelayed(pub, r, [0, 1, 2]);
    await until(() => rep.events().fed && rep.events().heldKeys === 3, 15_000, 'the replica to read the new stream');
  });

  it('resumes after NATS restarts mid-run: a replica ends with the engine’s later blocks', async () => {
    nextFleet();
    const pub = await engine();
    const warnings: string[] = [];
    const r = relay(pub);
    const rep = replica(warnings);
    await publishUntilRelayed(pub, r, [0, 1, 2]);
    await until(() => rep.events().heldKeys === 3);
    await nats.restart();
    await until(() => warnings.some((w) => /lost NATS/.test(w)) || rep.events().disconnects > 0, 10_000, 'the loss');
    for (let k = 0; k < 1_000 && rep.events().heldKeys < 8; k++) {
      pub.publish(stored(500 + k));
      await sleep(20);
    }
    await until(() => rep.events().fed && rep.events().heldKeys >= 8, 20_000, 'the replica to resume');
    expect(rep.events().state).toBe('live');
  });

  it('reads a stream only once its relay marked it created, where nats-server exits on a read mid-creation', async () => {
    nextFleet();
    const { connect } = await import('@nats-io/transport-node');
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const admin = await connect({ servers: [nats.url] });
    open.push(admin);
    const jsm = await jetstreamManager(admin);
    const affected = streamCreateRaceAffected(admin.info?.version);
    // A stream without its marker: what a replica sees while a relay is still creating it.
    await jsm.streams.add({ name: eventStreamName(fleet), subjects: [eventSubjects(fleet)] });
    const warnings: string[] = [];
    const rep = replica(warnings);
    if (affected) {
      await until(() => warnings.some((w) => /has not marked it created/.test(w)), 10_000, 'the warning');
      await sleep(1_200); // a retry or more
      expect(rep.events().fed).toBe(false);
    }
    // A relay finds the stream without a marker: it waits for another relay's creation to end
    // (bounded), then adds the marker; the replica then reads the stream.
    const pub = await engine();
    const r = relay(pub);
    await publishUntilRelayed(pub, r, [0, 1]);
    await until(() => rep.events().fed && rep.events().heldKeys === 2, 15_000, 'the replica to read the stream');
    expect(await fleetStreamNames(jsm, fleet)).toEqual(new Set([eventStreamName(fleet), readyStreamName(fleet)]));
  });

  it('a replica stalled while events flow (a slow consumer) catches up with nothing lost', async () => {
    nextFleet();
    const pub = await engine();
    const r = relay(pub);
    const rep = replica();
    await publishUntilRelayed(pub, r, [0]);
    await until(() => rep.events().heldKeys === 1);
    // 2,000 messages into the engine's socket, then this process (replica and relay) stalls 2 s:
    // the relay's socket buffers them, JetStream holds what it publishes until the replica asks.
    for (let id = 1; id <= 2_000; id++) pub.publish(stored(id));
    const end = Date.now() + 2_000;
    while (Date.now() < end); // the stall
    await until(() => rep.events().heldKeys === 2_001, 20_000, 'the stalled replica to catch up');
    expect(rep.events()).toMatchObject({ gaps: 0, rebuilds: 0, malformed: 0, state: 'live' });
    expect(r.stats().engines[0]).toMatchObject({ resets: 0 });
  });
});
