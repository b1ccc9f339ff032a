/**
 * The batch between finished requests' spans and the exporter (src/proxy/observe/trace-batch.ts):
 * full batches leave at once, at most two at a time; past the queue's bound spans are dropped,
 * counted and warned about; a failed export is a warning; close() sends everything and waits.
 */
import { describe, expect, it } from 'vitest';

import { TraceBatch } from '../src/proxy/observe/trace-batch.js';

/** A request's item (the batch is generic: records, or encoded spans). */
interface Item {
  n: number;
}
const trace = (n: number): Item => ({ n });

/** A sender whose exports stay open until the test ends them. */
function heldSender() {
  const open: Array<{ batch: Item[]; end: (error?: Error) => void }> = [];
  const sent: Item[][] = [];
  const send = (batch: Item[]) =>
    new Promise<void>((resolve, reject) => {
      sent.push(batch);
      open.push({ batch, end: (error) => (error ? reject(error) : resolve()) });
    });
  return { send, open, sent };
}

describe('the trace batch', () => {
  it('sends a full batch at once, at most two at a time, and the rest as exports end', async () => {
    const sender = heldSender();
    const warnings: string[] = [];
    const batch = new TraceBatch(sender.send, {
      maxBatch: 4,
      maxQueued: 100,
      delayMs: 60_000,
      warn: (w) => warnings.push(w),
    });
    for (let n = 0; n < 14; n++) batch.add(trace(n));
    expect(sender.sent.map((b) => b.length)).toEqual([4, 4]); // two in flight; 6 wait
    sender.open.shift()!.end();
    await new Promise((r) => setImmediate(r));
    expect(sender.sent.map((b) => b.length)).toEqual([4, 4, 4]);
    const closed = batch.close();
    for (let i = 0; i < 10 && sender.open.length > 0; i++) {
      sender.open.shift()!.end();
      await new Promise((r) => setImmediate(r));
    }
    await closed;
    expect(sender.sent.flat().map((t) => t.n)).toEqual([...Array(14).keys()]);
    expect(warnings).toEqual([]);
    batch.add(trace(99)); // after close: ignored
    expect(sender.sent.flat()).toHaveLength(14);
  });

  it('drops what passes the queue’s bound, counting it, and warns once', async () => {
    const sender = heldSender();
    const warnings: string[] = [];
    const batch = new TraceBatch(sender.send, {
      maxBatch: 2,
      maxQueued: 3,
      delayMs: 60_000,
      warn: (w) => warnings.push(w),
    });
    for (let n = 0; n < 20; n++) batch.add(trace(n)); // 2 batches of 2 in flight, 3 queued, 13 dropped
    expect(batch.dropped).toBe(13);
    expect(warnings).toEqual([
      expect.stringMatching(/^kvroute proxy: tracing: 1 requests' spans dropped: the trace exporter cannot keep up/),
    ]);
    const closed = batch.close();
    while (sender.open.length > 0) {
      sender.open.shift()!.end();
      await new Promise((r) => setImmediate(r));
    }
    await closed;
    expect(sender.sent.flat()).toHaveLength(7);
  });

  it('counts requests, not items: chunks fill batches by their requests; held ones are drained', async () => {
    const sender = heldSender();
    const held: Item[] = [];
    let drains = 0;
    const batch: TraceBatch<Item> = new TraceBatch(sender.send, {
      maxBatch: 8,
      maxQueued: 12,
      delayMs: 20,
      warn: () => {},
      drain: () => {
        drains++;
        for (const item of held.splice(0)) batch.add(item, item.n);
      },
    });
    batch.add(trace(5), 5);
    batch.add(trace(3), 3); // 8 requests: a full batch leaves at once
    expect(sender.sent.map((b) => b.map((t) => t.n))).toEqual([[5, 3]]);
    batch.add(trace(6), 6);
    batch.add(trace(6), 6); // 12 requests: [6] leaves (6 more would pass 8), [6] waits
    batch.add(trace(6), 6); // 12 waiting: at the bound
    batch.add(trace(1), 1); // past it: dropped, counted as its requests
    expect(batch.dropped).toBe(1);
    sender.open.shift()!.end();
    await new Promise((r) => setImmediate(r));
    held.push(trace(2)); // a caller's held-back chunk: added by the timed flush's drain
    while (drains === 0) await new Promise((r) => setTimeout(r, 5));
    const closed = batch.close();
    while (sender.open.length > 0 || sender.sent.flat().length < 5) {
      sender.open.shift()?.end();
      await new Promise((r) => setImmediate(r));
    }
    await closed;
    // Batches hold at most 8 requests, but always at least one item.
    expect(sender.sent.map((b) => b.map((t) => t.n))).toEqual([[5, 3], [6], [6], [6, 2]]);
  });

  it('a failed export is a warning, and later batches still go', async () => {
    const sender = heldSender();
    const warnings: string[] = [];
    const batch = new TraceBatch(sender.send, { maxBatch: 1, delayMs: 60_000, warn: (w) => warnings.push(w) });
    batch.add(trace(1));
    sender.open.shift()!.end(new Error('collector answered 400'));
    await new Promise((r) => setImmediate(r));
    expect(batch.failedBatches).toBe(1);
    expect(warnings.join('\n')).toMatch(/exporting 1 requests' spans failed: collector answered 400/);
    batch.add(trace(2));
    expect(sender.sent).toHaveLength(2);
    sender.open.shift()!.end();
    await batch.close();
  });

  it('sends a partial batch after its delay', async () => {
    const sender = heldSender();
    const batch = new TraceBatch(sender.send, { maxBatch: 100, delayMs: 20, warn: () => {} });
    batch.add(trace(1));
    expect(sender.sent).toHaveLength(0);
    await new Promise((r) => setTimeout(r, 200));
    expect(sender.sent.map((b) => b.length)).toEqual([1]);
    sender.open.shift()!.end();
    await batch.close();
  });
});
