/**
 * The KV event packer: decode-then-pack (addBatch) and the direct decoder (addPayload) write the
 * same packed stream for random messages in both vLLM encodings and refuse malformed payloads
 * with the same message; a refused message leaves the packer as it was; buffers grow from tiny
 * and are reused after reset(); and what is packed, applied to a core, is what the events say.
 */
import { Packr } from 'msgpackr';
import { describe, expect, it } from 'vitest';

import { EVENT_STAT_FIELDS, EventStat, type PackedKvEvents } from '../src/core/core-router.js';
import { decodeKvEventBatch, type KvEvent } from '../src/events/kv-event-batch.js';
import { KvEventPacker } from '../src/events/packed-kv-events.js';
import { makeCore } from './helpers/core-twins.js';
import { EngineModel, conversations } from './helpers/kv-event-gen.js';
import { Rng } from './helpers/random.js';
import { thrown } from './helpers/routers.js';

const packr = new Packr({ useRecords: false });

/** An event as vLLM puts it on the wire: a positional array, or a map with `type`. */
function wire(e: KvEvent, asMap: boolean): unknown {
  if (e.type === 'cleared') return asMap ? { type: 'AllBlocksCleared' } : ['AllBlocksCleared'];
  if (e.type === 'removed')
    return asMap
      ? { type: 'BlockRemoved', block_hashes: e.blockHashes, medium: e.medium }
      : ['BlockRemoved', e.blockHashes, e.medium];
  const fields = [e.blockHashes, e.parentBlockHash, e.tokenIds, e.blockSize, e.loraId, e.medium] as const;
  return asMap
    ? {
        type: 'BlockStored',
        block_hashes: fields[0],
        parent_block_hash: fields[1],
        token_ids: fields[2],
        block_size: fields[3],
        lora_id: fields[4],
        medium: fields[5],
      }
    : ['BlockStored', ...fields];
}

const payloadOf = (events: KvEvent[], asMap: boolean, extra: unknown[] = []) =>
  packr.pack(
    asMap
      ? { ts: 1.5, events: [...events.map((e) => wire(e, true)), ...extra], data_parallel_rank: 0 }
      : [1.5, [...events.map((e) => wire(e, false)), ...extra], null],
  );

const filled = (p: PackedKvEvents & { events: number; blocks: number }) => ({
  ops: Array.from(p.ops.subarray(0, p.opsLength)),
  hashes: Array.from(p.hashes.subarray(0, p.hashesLength)),
  tokens: Array.from(p.tokens.subarray(0, p.tokensLength)),
  events: p.events,
  blocks: p.blocks,
});

describe('KvEventPacker', () => {
  it('packs the same stream from payloads as from decoded events, in both encodings', () => {
    const rng = new Rng(5);
    const convs = conversations(rng, 4);
    const engine = new EngineModel(0, convs, 4);
    let unknown = 0;
    for (let round = 0; round < 300; round++) {
      const direct = new KvEventPacker(1, 1);
      const decoded = new KvEventPacker(1, 1);
      for (let m = rng.int(1, 4); m > 0; m--) {
        const asMap = rng.chance(0.5);
        const extra = rng.chance(0.2) ? [asMap ? { type: 'BlockMoved' } : ['BlockMoved', 1]] : [];
        const payload = payloadOf(engine.events(rng, 6), asMap, extra);
        const info = direct.addPayload(payload);
        const batch = decodeKvEventBatch(payload);
        decoded.addBatch(batch);
        expect(info).toEqual({
          ts: batch.ts,
          dataParallelRank: batch.dataParallelRank,
          unknownEvents: batch.unknownEvents,
        });
        unknown += info.unknownEvents;
      }
      expect(filled(direct)).toEqual(filled(decoded));
    }
    expect(unknown).toBeGreaterThan(10);
  });

  it.each([
    ['not msgpack', new Uint8Array([0xc1])],
    ['a string batch', packr.pack('hello')],
    ['events not an array', packr.pack({ ts: 1, events: 3 })],
    ['an event that is a number', packr.pack([1, [5], 0])],
    ['a fractional hash', packr.pack([1, [['BlockRemoved', [1.5], null]], 0])],
    ['removed hashes not an array', packr.pack([1, [['BlockRemoved', 7, null]], 0])],
    ['a numeric medium', packr.pack({ ts: 1, events: [{ type: 'BlockRemoved', block_hashes: [], medium: 3 }] })],
    ['a negative token', packr.pack([1, [['BlockStored', [1n], null, [-1], 1, null, null]], 0])],
    ['a string token', packr.pack([1, [['BlockStored', [1n], null, ['a'], 1, null, null]], 0])],
    ['a block size of 0', packr.pack([1, [['BlockStored', [1n], null, [], 0, null, null]], 0])],
    ['tokens not a multiple', packr.pack([1, [['BlockStored', [1n, 2n], null, [1, 2, 3], 2, null, null]], 0])],
    ['a bad parent', packr.pack([1, [['BlockStored', [1n], 'x', [1], 1, null, null]], 0])],
    ['a string lora', packr.pack([1, [['BlockStored', [1n], null, [1], 1, 'a', null]], 0])],
    ['a bad event after good ones', packr.pack([1, [['AllBlocksCleared'], ['BlockRemoved', [1n], null], [3]], 0])],
  ])('refuses %s with the decoder’s message, leaving the packer as it was', (_, payload) => {
    const expected = thrown(() => decodeKvEventBatch(payload));
    const p = new KvEventPacker(1, 1);
    p.addPayload(payloadOf([{ type: 'removed', blockHashes: [9n], medium: null }], false));
    const before = filled(p);
    const error = thrown(() => p.addPayload(payload));
    expect(error.message).toBe(expected.message);
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_KV_EVENT' });
    expect(filled(p)).toEqual(before);
  });

  it('refuses a token id past u32 on both paths, rolling back the whole message', () => {
    const big: KvEvent = {
      type: 'stored',
      blockHashes: [1n, 2n],
      parentBlockHash: null,
      tokenIds: [1, 2, 3, 2 ** 32],
      blockSize: 2,
      loraId: null,
      medium: null,
    };
    const p = new KvEventPacker(1, 1);
    expect(thrown(() => p.addEvents([{ type: 'cleared' }, big])).message).toBe(
      'events[1].token_ids[3]: must be a u32 token id, got 4294967296',
    );
    expect(thrown(() => p.addPayload(payloadOf([{ type: 'cleared' }, big], false))).message).toBe(
      'batch.events[1].token_ids[3]: must be a u32 token id, got 4294967296',
    );
    expect(filled(p)).toEqual({ ops: [], hashes: [], tokens: [], events: 0, blocks: 0 });
  });

  it('keeps its buffers across reset()', () => {
    const p = new KvEventPacker(4, 64);
    const ops = p.ops;
    p.addEvents([{ type: 'removed', blockHashes: [1n, 2n], medium: 'GPU' }, { type: 'cleared' }]);
    p.reset();
    expect(filled(p)).toEqual({ ops: [], hashes: [], tokens: [], events: 0, blocks: 0 });
    p.addEvents([{ type: 'cleared' }]);
    expect(p.ops).toBe(ops);
  });

  it.each([true, false])('packed payloads applied to a core (native %s) hold what the events say', (native) => {
    const rng = new Rng(8);
    const convs = conversations(rng, 4);
    const engine = new EngineModel(0, convs, 4);
    const c = makeCore(native, { blockTokens: 4 });
    c.core.addInstance('engine-0', 100);
    const p = new KvEventPacker();
    for (let tick = 0; tick < 100; tick++) {
      p.reset();
      for (let m = rng.int(1, 4); m > 0; m--) p.addPayload(payloadOf(engine.events(rng, 6), rng.chance(0.5)));
      c.core.applyKvEvents(0, p);
    }
    const out = new Float64Array(EVENT_STAT_FIELDS);
    c.core.eventStats(0, out);
    expect(out[EventStat.HeldKeys]).toBe(engine.refs.size);
    expect(out[EventStat.EngineBlocks]).toBe(engine.held.size);
    expect(out[EventStat.Stored]).toBe(engine.counters.stored);
    expect(out[EventStat.Orphaned]).toBe(engine.counters.orphaned);
    expect(c.core.checkInvariants()).toBe('');
  });
});
