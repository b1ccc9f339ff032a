/**
 * vLLM KV cache event decoding (src/events/kv-event-batch.ts) and the seq check
 * (src/events/kv-event-seq.ts): both wire encodings decode to the same events, u64 hashes stay
 * exact however they were packed, malformed frames are refused naming the field, and a randomized
 * stream of gaps, restarts and duplicates is classified as a model of it says.
 */
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';

import { decodeKvEventBatch, decodeKvEventMessage, KvEventFormatError } from '../src/events/kv-event-batch.js';
import { KvEventSeq } from '../src/events/kv-event-seq.js';

const packr = new Packr({ useRecords: false });
const pack = (value: unknown): Uint8Array => packr.pack(value);
const U64_MAX = 2n ** 64n - 1n;

const STORED = { hashes: [U64_MAX, 5n, 2n ** 63n], parent: 12345678901234567890n, tokens: [1, 2, 3, 4, 5, 6], size: 2 };
const positional = [
  1_700_000_000.25,
  [
    ['BlockStored', STORED.hashes, STORED.parent, STORED.tokens, STORED.size, null, 'GPU'],
    ['BlockRemoved', [7n], 'GPU'],
    ['AllBlocksCleared'],
  ],
  0,
];
const mapped = {
  ts: 1_700_000_000.25,
  events: [
    {
      type: 'BlockStored',
      block_hashes: STORED.hashes,
      parent_block_hash: STORED.parent,
      token_ids: STORED.tokens,
      block_size: STORED.size,
      lora_id: null,
      medium: 'GPU',
    },
    { type: 'BlockRemoved', block_hashes: [7], medium: 'GPU' },
    { type: 'AllBlocksCleared' },
  ],
  data_parallel_rank: 0,
};

describe('decodeKvEventBatch', () => {
  it('decodes the positional and the map encodings to the same events, hashes exact', () => {
    const a = decodeKvEventBatch(pack(positional));
    const b = decodeKvEventBatch(pack(mapped));
    expect(a).toEqual(b);
    expect(a.events[0]).toEqual({
      type: 'stored',
      blockHashes: [U64_MAX, 5n, 2n ** 63n],
      parentBlockHash: STORED.parent,
      tokenIds: STORED.tokens,
      blockSize: 2,
      loraId: null,
      medium: 'GPU',
    });
    expect(a.events.slice(1)).toEqual([{ type: 'removed', blockHashes: [7n], medium: 'GPU' }, { type: 'cleared' }]);
    expect(a.dataParallelRank).toBe(0);
  });

  it('reads a signed int64 hash as the same unsigned u64', () => {
    const batch = decodeKvEventBatch(pack([0, [['BlockRemoved', [-1n, -2], null]], null]));
    expect(batch.events[0]).toEqual({ type: 'removed', blockHashes: [U64_MAX, U64_MAX - 1n], medium: null });
  });

  it('skips and counts event types it does not know', () => {
    const batch = decodeKvEventBatch(pack([0, [['BlockMoved', 1], { type: 'Future' }, ['AllBlocksCleared']], null]));
    expect(batch).toMatchObject({ events: [{ type: 'cleared' }], unknownEvents: 2 });
  });

  it.each([
    ['truncated msgpack', new Uint8Array([0x93, 0xcb, 0x41]), /payload: not msgpack/],
    ['a string batch', pack('hello'), /batch: must be a KVEventBatch/],
    ['no timestamp', pack([null, [], 0]), /batch\.ts: must be a finite number/],
    ['events not an array', pack({ ts: 1, events: 3 }), /batch\.events: must be an array/],
    ['an event that is a number', pack([1, [5], 0]), /batch\.events\[0\]: must be an event/],
    [
      'a float hash',
      pack([1, [['BlockRemoved', [1.5], null]], 0]),
      /batch\.events\[0\]\.block_hashes\[0\]: must be an integer block hash, got 1\.5/,
    ],
    [
      'a negative token',
      pack([1, [['BlockStored', [1n], null, [-1], 1, null, null]], 0]),
      /token_ids\[0\]: must be a token id/,
    ],
    [
      'a zero block size',
      pack([1, [['BlockStored', [1n], null, [], 0, null, null]], 0]),
      /block_size: must be an integer ≥ 1, got 0/,
    ],
    [
      'tokens that do not fill the blocks',
      pack([1, [['BlockStored', [1n, 2n], null, [1, 2, 3], 2, null, null]], 0]),
      /token_ids: must be block_size × the number of block_hashes tokens \(2 × 2\), got "3 tokens"/,
    ],
    [
      'a numeric medium',
      pack({ ts: 1, events: [{ type: 'BlockRemoved', block_hashes: [], medium: 3 }] }),
      /medium: must be a string or null, got 3/,
    ],
  ])('refuses %s, naming the field', (_name, payload, message) => {
    const attempt = () => decodeKvEventBatch(payload);
    expect(attempt).toThrow(KvEventFormatError);
    expect(attempt).toThrow(message);
  });
});

describe('decodeKvEventMessage', () => {
  const seq = (n: bigint) => {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigInt64(0, n, false);
    return b;
  };
  it('reads the topic, the big-endian seq (−1 ends a replay) and the payload', () => {
    const message = decodeKvEventMessage([Buffer.from('kv'), seq(2n ** 40n + 3n), pack(positional)]);
    expect(message.topic).toBe('kv');
    expect(message.seq).toBe(2n ** 40n + 3n);
    expect(message.batch.events).toHaveLength(3);
    expect(decodeKvEventMessage([Buffer.from(''), seq(-1n), pack([0, [], null])]).seq).toBe(-1n);
  });
  it('refuses a wrong frame count and a short seq', () => {
    expect(() => decodeKvEventMessage([Buffer.from('kv'), seq(1n)])).toThrow(/message: must be three frames/);
    expect(() => decodeKvEventMessage([Buffer.from('kv'), new Uint8Array(4), pack(positional)])).toThrow(
      /seq: must be 8 bytes, got "4 bytes"/,
    );
  });
});

describe('KvEventSeq', () => {
  it('classifies in-order, gaps, restarts and stale messages', () => {
    const s = new KvEventSeq();
    expect([0n, 1n, 2n, 5n, 4n, 6n, 0n, 1n, 3n].map((n) => s.observe(n).kind)).toEqual([
      'next',
      'next',
      'next',
      'gap',
      'stale',
      'next',
      'restart',
      'next',
      'gap',
    ]);
    expect(s.counts).toEqual({ messages: 9, gaps: 2, missing: 3n, restarts: 1, stale: 1 });
    const joined = new KvEventSeq();
    expect(joined.observe(7n)).toEqual({ kind: 'gap', from: 0n, to: 7n });
  });

  it('agrees with a model over random streams (randomized)', () => {
    let state = 42;
    const random = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 50; round++) {
      const s = new KvEventSeq();
      let publisher = 0n; // the engine's next seq
      let applied = -1n; // the model's last applied
      for (let k = 0; k < 200; k++) {
        const r = random();
        let seq: bigint;
        if (r < 0.05) publisher = 0n; // engine restart
        if (r < 0.15 && r >= 0.05) publisher += BigInt(1 + Math.floor(random() * 5)); // drops
        if (r > 0.95 && applied > 0n)
          seq = applied - BigInt(Math.floor(random() * Number(applied))); // duplicate
        else seq = publisher++;
        const verdict = s.observe(seq).kind;
        const expected = seq === applied + 1n ? 'next' : seq === 0n ? 'restart' : seq > applied + 1n ? 'gap' : 'stale';
        expect(verdict).toBe(expected);
        if (expected !== 'stale') applied = seq;
        expect(s.lastApplied).toBe(applied);
      }
    }
  });
});
