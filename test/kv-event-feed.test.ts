/**
 * KvEventFeed: what each seq verdict and connection event does to an instance's event-fed index,
 * first by the rules alone (no sockets), then against real ZeroMQ PUB and ROUTER sockets on
 * loopback: a replayed gap, a replay buffer that no longer holds the gap, a replay that never
 * answers, and a publisher that dies and comes back.
 */
import { Packr } from 'msgpackr';
import { afterEach, describe, expect, it } from 'vitest';
import { Publisher, Router } from 'zeromq';

import type { KvEventMessage } from '../src/events/kv-event-batch.js';
import { KvEventPublisher } from '../src/sim/kv-event-publisher.js';
import { KvEventFeed, type KvEventSink } from '../src/events/kv-event-feed.js';

const packr = new Packr({ useRecords: false });
const seqFrame = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(n);
  return b;
};
const payload = (seq: bigint) =>
  packr.pack([Number(seq), [['BlockStored', [seq + 100n], null, [1, 2], 2, null, 'GPU']], 0]);
const message = (seq: bigint): KvEventMessage => ({
  topic: 'kv',
  seq,
  batch: { ts: Number(seq), events: [], unknownEvents: 0, dataParallelRank: 0 },
});

/** Records what the feed did to the index, as a log of steps. */
class RecordingSink implements KvEventSink {
  log: string[] = [];
  fed = false;
  applied: bigint[] = [];
  apply(messages: readonly KvEventMessage[]): void {
    this.log.push(`apply ${messages.map((m) => m.seq).join(',')}`);
    this.applied.push(...messages.map((m) => m.seq));
  }
  clear(): void {
    this.log.push('clear');
  }
  setFed(fed: boolean): void {
    this.fed = fed;
    this.log.push(`fed ${fed}`);
  }
}

const turn = () => new Promise((r) => setImmediate(r));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!what()) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(10);
  }
}

const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0).reverse()) await o.close();
});

describe('KvEventFeed rules', () => {
  const feed = (replay?: string) => {
    const sink = new RecordingSink();
    const warnings: string[] = [];
    const f = new KvEventFeed({ endpoint: 'tcp://127.0.0.1:1', replay, sink, onWarning: (w) => warnings.push(w) });
    open.push(f);
    return { f, sink, warnings };
  };

  it('is not fed until connected, batches one turn into one apply, and stops on disconnect', async () => {
    const { f, sink, warnings } = feed();
    expect(sink.fed).toBe(false);
    expect(f.state).toBe('connecting');
    f.connectionForTest('retry');
    f.connectionForTest('retry');
    expect(warnings).toEqual([expect.stringMatching(/cannot connect; routing on the belief index/)]);
    f.connectionForTest('connect');
    expect(sink.fed).toBe(true);
    f.receivedForTest(message(0n), { kind: 'next' });
    f.receivedForTest(message(1n), { kind: 'next' });
    expect(sink.applied).toEqual([]);
    await turn();
    expect(sink.log).toEqual(['fed false', 'fed true', 'apply 0,1']);
    f.connectionForTest('disconnect');
    expect(sink.fed).toBe(false);
    expect(f.state).toBe('down');
    expect(f.stats().disconnects).toBe(1);
    f.connectionForTest('connect');
    // A reconnection may be a restarted engine: the index is cleared before it is fed again.
    expect(sink.log.slice(-3)).toEqual(['fed false', 'clear', 'fed true']);
  });

  it('clears and rebuilds on a gap without a replay endpoint, and on a restart', async () => {
    const { f, sink } = feed();
    f.connectionForTest('connect');
    f.receivedForTest(message(0n), { kind: 'next' });
    f.receivedForTest(message(5n), { kind: 'gap', from: 1n, to: 5n });
    f.receivedForTest(message(6n), { kind: 'next' });
    f.receivedForTest(message(0n), { kind: 'restart' });
    await turn();
    expect(sink.log).toEqual(['fed false', 'fed true', 'apply 0', 'clear', 'apply 5,6', 'clear', 'apply 0']);
    expect(f.stats().rebuilds).toBe(1);
  });
});

describe('KvEventFeed over ZeroMQ', () => {
  async function publisher(endpoint = 'tcp://127.0.0.1:*') {
    const pub = new Publisher({ linger: 0 });
    await pub.bind(endpoint);
    return pub;
  }

  /** A replay ROUTER answering from `buffer` (seq → payload), or never when `silent`. */
  async function replayServer(buffer: Map<bigint, Buffer>, silent = false) {
    const router = new Router({ linger: 0 });
    await router.bind('tcp://127.0.0.1:*');
    const requests: bigint[] = [];
    void (async () => {
      try {
        for await (const [identity, delimiter, start] of router) {
          // vLLM's ROUTER answers only [identity, empty, 8-byte seq].
          if (delimiter!.length !== 0 || start?.length !== 8) continue;
          const from = start.readBigInt64BE(0);
          requests.push(from);
          if (silent) continue;
          for (const [seq, body] of [...buffer].sort((a, b) => Number(a[0] - b[0])))
            if (seq >= from) await router.send([identity!, Buffer.alloc(0), seqFrame(seq), body]);
          await router.send([identity!, Buffer.alloc(0), seqFrame(-1n), Buffer.alloc(0)]);
        }
      } catch {
        // closed
      }
    })();
    return { router, requests };
  }

  /** Publishes seq 0 until the feed has it (a SUB socket misses what precedes its joining). */
  async function join(pub: Publisher, sink: RecordingSink) {
    for (let k = 0; k < 200 && sink.applied.length === 0; k++) {
      await pub.send(['kv', seqFrame(0n), payload(0n)]);
      await sleep(10);
    }
    expect(sink.applied[0]).toBe(0n);
  }

  it('replays a gap from the replay socket, then applies what waited, in order', async () => {
    const pub = await publisher();
    open.push(pub);
    const buffer = new Map([1n, 2n, 3n].map((s) => [s, payload(s)]));
    const { router, requests } = await replayServer(buffer);
    open.push(router);
    const sink = new RecordingSink();
    const feed = new KvEventFeed({
      endpoint: pub.lastEndpoint!,
      replay: router.lastEndpoint!,
      sink,
      onWarning: () => {},
    });
    open.push(feed);
    await feed.start();
    await join(pub, sink);
    const joined = sink.applied.length; // seq 0, maybe more than once (stale repeats are dropped)
    await pub.send(['kv', seqFrame(4n), payload(4n)]); // 1..3 never published live
    await pub.send(['kv', seqFrame(5n), payload(5n)]);
    await until(() => sink.applied.includes(5n));
    expect(requests).toEqual([1n]);
    expect(sink.applied.slice(joined)).toEqual([1n, 2n, 3n, 4n, 5n]);
    expect(sink.log).toContain('fed false'); // during the replay
    expect(sink.fed).toBe(true);
    expect(feed.stats()).toMatchObject({ gaps: 1, missing: 3, replays: 1, replayFailures: 0, rebuilds: 0 });
  });

  it('rebuilds when the replay buffer no longer holds the gap, or the replay never answers', async () => {
    for (const silent of [false, true]) {
      const pub = await publisher();
      open.push(pub);
      const { router } = await replayServer(new Map([[3n, payload(3n)]]), silent); // 1 and 2 are gone
      open.push(router);
      const sink = new RecordingSink();
      const warnings: string[] = [];
      const feed = new KvEventFeed({
        endpoint: pub.lastEndpoint!,
        replay: router.lastEndpoint!,
        replayTimeoutMs: 300,
        sink,
        onWarning: (w) => warnings.push(w),
      });
      open.push(feed);
      await feed.start();
      await join(pub, sink);
      await pub.send(['kv', seqFrame(4n), payload(4n)]);
      await until(() => sink.applied.includes(4n));
      const afterClear = sink.log.slice(sink.log.lastIndexOf('clear') + 1);
      expect(afterClear.join(';')).toBe(silent ? 'apply 4;fed true' : 'apply 3;apply 4;fed true');
      expect(feed.stats()).toMatchObject({ replays: 1, replayFailures: 1, rebuilds: 1 });
      expect(warnings.join('\n')).toMatch(silent ? /replay failed/ : /did not hold seq 1\.\.3/);
    }
  });

  it("rebuilds from sim serve's replay socket (vLLM's framing) what it missed before joining", async () => {
    const pub = await KvEventPublisher.start({
      endpoint: 'tcp://127.0.0.1:*',
      replayEndpoint: 'tcp://127.0.0.1:*',
      encoding: 'array',
    });
    open.push(pub);
    const stored = (id: number) => [
      { type: 'BlockStored' as const, blockHashes: [id], parentBlockHash: null, tokenIds: [id, id], blockSize: 2 },
    ];
    for (let id = 0; id < 5; id++) pub.publish(stored(id)); // seq 0..4, before anyone listens
    const sink = new RecordingSink();
    const feed = new KvEventFeed({ endpoint: pub.endpoint, replay: pub.replayEndpoint!, sink, onWarning: () => {} });
    open.push(feed);
    await feed.start();
    await until(() => feed.state === 'live');
    for (let k = 0; k < 200 && sink.applied.length === 0; k++) {
      pub.publish(stored(100 + k));
      await sleep(10);
    }
    await until(() => feed.state === 'live' && sink.applied.length >= 6);
    // Seq 0..4 came from the replay, in order, before the first live message.
    expect(sink.applied.slice(0, 5)).toEqual([0n, 1n, 2n, 3n, 4n]);
    expect(feed.stats()).toMatchObject({ replays: 1, replayFailures: 0, rebuilds: 0 });
  });

  it('falls back when the publisher dies and returns to events when it is back', async () => {
    const first = await publisher();
    const endpoint = first.lastEndpoint!;
    const sink = new RecordingSink();
    const warnings: string[] = [];
    const feed = new KvEventFeed({ endpoint, sink, onWarning: (w) => warnings.push(w) });
    open.push(feed);
    await feed.start();
    await join(first, sink);
    first.close();
    await until(() => feed.state === 'down');
    expect(sink.fed).toBe(false);
    expect(warnings.join('\n')).toMatch(/disconnected; routing on the belief index/);
    // The engine comes back on the same endpoint, numbering from 0 again.
    const second = await publisher(endpoint);
    open.push(second);
    await until(() => feed.state === 'live', 10_000);
    const before = sink.applied.length;
    for (let k = 0; k < 200 && sink.applied.length === before; k++) {
      await second.send(['kv', seqFrame(0n), payload(0n)]);
      await sleep(10);
    }
    expect(sink.fed).toBe(true);
    expect(sink.log).toContain('clear');
    expect(sink.applied.at(-1)).toBe(0n);
  });
});
