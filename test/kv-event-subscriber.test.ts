/**
 * The KV event subscriber against a real ZeroMQ publisher on loopback: messages in both encodings
 * arrive decoded and in order, a dropped seq is reported as a gap, a restart as a restart, and a
 * malformed message is counted and skipped without ending the stream.
 */
import { Packr } from 'msgpackr';
import { afterEach, describe, expect, it } from 'vitest';
import { Publisher } from 'zeromq';

import type { KvEventMessage } from '../src/events/kv-event-batch.js';
import type { SeqVerdict } from '../src/events/kv-event-seq.js';
import { KvEventSubscriber } from '../src/events/kv-event-subscriber.js';

const packr = new Packr({ useRecords: false });
const seqFrame = (n: bigint) => {
  const b = Buffer.alloc(8);
  b.writeBigInt64BE(n);
  return b;
};
const stored = (hash: bigint) => ['BlockStored', [hash], null, [1, 2], 2, null, 'GPU'];

const open: Array<{ close(): unknown }> = [];
afterEach(async () => {
  for (const o of open.splice(0)) await o.close();
});

describe('KvEventSubscriber', () => {
  it('receives, decodes and checks a live stream; skips a malformed message', async () => {
    const pub = new Publisher();
    open.push(pub);
    await pub.bind('tcp://127.0.0.1:*');
    const got: Array<{ seq: bigint; verdict: string; events: number }> = [];
    const done = new Promise<void>((resolve) => {
      const sub = new KvEventSubscriber(pub.lastEndpoint!, (message: KvEventMessage, verdict: SeqVerdict) => {
        got.push({ seq: message.seq, verdict: verdict.kind, events: message.batch.events.length });
        if (message.batch.ts === 4) resolve();
      });
      open.push(sub);
      void sub.start();
    });
    const subscriber = open[1] as KvEventSubscriber;
    // A SUB socket misses what is published before it has joined: publish seq 0 until it is seen
    // (bounded), as a real engine's stream would keep flowing.
    for (let k = 0; k < 100 && subscriber.counts.messages === 0; k++) {
      await pub.send(['kv', seqFrame(0n), packr.pack([1, [stored(10n)], 0])]);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(subscriber.counts.messages).toBeGreaterThan(0);
    await pub.send(['kv', seqFrame(1n), Buffer.from([0x93, 0xcb])]); // malformed: skipped
    await pub.send(['kv', seqFrame(3n), packr.pack({ ts: 2, events: [{ type: 'AllBlocksCleared' }] })]);
    await pub.send(['kv', seqFrame(0n), packr.pack([3, [stored(11n), ['BlockRemoved', [10n], 'GPU']], 0])]);
    await pub.send(['kv', seqFrame(1n), packr.pack([4, [], 0])]);
    await Promise.race([done, new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), 5000))]);
    // The joining probe (seq 0) may arrive more than once; a repeated 0 reads as a restart.
    expect(got.slice(-3)).toEqual([
      { seq: 3n, verdict: 'gap', events: 1 },
      { seq: 0n, verdict: 'restart', events: 2 },
      { seq: 1n, verdict: 'next', events: 0 },
    ]);
    expect(got[0]).toEqual({ seq: 0n, verdict: 'next', events: 1 });
    expect(subscriber.counts.malformed).toBe(1);
    expect(subscriber.lastError).toMatch(/payload: not msgpack/);
    expect(subscriber.seq.counts.gaps).toBe(1);
    expect(subscriber.seq.counts.restarts).toBe(got.filter((g) => g.verdict === 'restart').length);
  });

  it('counts a malformed message without throwing, and close() is idempotent', async () => {
    const sub = new KvEventSubscriber('tcp://127.0.0.1:1', () => {
      throw new Error('not called');
    });
    sub.take([Buffer.from('kv'), Buffer.alloc(4), Buffer.alloc(0)]);
    expect(sub.counts).toMatchObject({ malformed: 1, messages: 0 });
    expect(sub.lastError).toMatch(/seq: must be 8 bytes/);
    await sub.start();
    await sub.close();
    await sub.close();
  });
});
