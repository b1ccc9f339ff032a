/**
 * The simulated engine's KV cache events, without sockets: the block pool's listener, and the
 * whole path from an engine model's steps through EngineKvEvents, the wire encoding (both) and
 * kvroute's own decoder. Randomized: an index fed only by the decoded events must hold exactly
 * the blocks the pool holds, every stored block's token_ids must be its prompt's tokens (or its
 * derived tokens), and each parent must be the block before it.
 */
import { Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';

import { Rng } from './helpers/random.js';
import { decodeKvEventBatch, type KvEvent } from '../src/events/kv-event-batch.js';
import { BlockPool, type BlockPoolListener } from '../src/sim/block-pool.js';
import { tokenBlockIds } from '../src/sim/completion-request.js';
import { DERIVED_TOKEN_VOCAB, derivedBlockTokens } from '../src/sim/derived-tokens.js';
import { EngineKvEvents } from '../src/sim/engine-kv-events.js';
import { EngineModel, type EngineRequest } from '../src/sim/engine-model.js';
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS } from '../src/sim/engine-preset.js';
import { encodeKvEventBatch, KV_EVENT_ENCODINGS, type PublishedKvEvent } from '../src/sim/kv-event-encoding.js';

const preset = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
const u64 = (id: number): bigint => BigInt.asUintN(64, BigInt(id));

describe('BlockPool listener', () => {
  it('hears every naming, eviction and reset: a set fed by it equals the pool (randomized)', () => {
    const rng = new Rng(7);
    const pool = new BlockPool<string>(24);
    const heard = new Set<number>();
    const log: string[] = [];
    const listener: BlockPoolListener<string> = {
      named: (id, origin, position) => {
        expect(heard.has(id)).toBe(false);
        heard.add(id);
        log.push(`${origin}:${position}`);
      },
      evicted: (id) => {
        expect(heard.delete(id)).toBe(true);
      },
      cleared: () => heard.clear(),
    };
    pool.listener = listener;
    const held: number[][] = [];
    const everSeen = new Set<number>();
    for (let op = 0; op < 5000; op++) {
      const roll = rng.next();
      if (roll < 0.5) {
        const blocks = rng.int(1, 6);
        if (!pool.allocate(blocks)) continue;
        const handles: number[] = [];
        for (let i = 0; i < blocks; i++) {
          const id = rng.int(-50, 200); // collisions with present ids stay anonymous
          everSeen.add(id);
          handles.push(pool.register(id, `op${op}`, i));
        }
        // Named blocks are released through their handle; anonymous ones (-1) become free.
        held.push(handles);
      } else if (roll < 0.97 && held.length > 0) {
        pool.releaseAll(held.splice(rng.int(0, held.length - 1), 1)[0]!);
      } else {
        const referenced = pool.referenced;
        expect(pool.resetPrefixCache()).toBe(referenced === 0);
      }
      if (op % 97 === 0)
        for (const id of everSeen) expect(heard.has(id), `id ${id}`).toBe(pool.matchPrefix([id]) === 1);
    }
    for (const id of everSeen) expect(heard.has(id)).toBe(pool.matchPrefix([id]) === 1);
    expect(pool.evictions).toBeGreaterThan(100);
    expect(log[0]).toMatch(/^op\d+:0$/);
  });

  it('refuses a prefix-cache reset while blocks are referenced, and drops every cached block otherwise', () => {
    const pool = new BlockPool(4);
    const events: string[] = [];
    pool.listener = {
      named: (id) => events.push(`+${id}`),
      evicted: (id) => events.push(`-${id}`),
      cleared: () => events.push('clear'),
    };
    expect(pool.allocate(2)).toBe(true);
    const handles = [pool.register(1), pool.register(2)];
    expect(pool.resetPrefixCache()).toBe(false);
    expect(pool.matchPrefix([1, 2])).toBe(2);
    pool.releaseAll(handles);
    expect(pool.resetPrefixCache()).toBe(true);
    expect(pool.matchPrefix([1, 2])).toBe(0);
    expect([pool.cached, pool.referenced, pool.available]).toEqual([0, 0, 4]);
    expect(pool.allocate(4)).toBe(true); // every slot is usable again
    expect(events).toEqual(['+1', '+2', 'clear']);
  });
});

describe('derived tokens', () => {
  it('are a pure function of the id, in the vocabulary, and differ between ids', () => {
    for (const id of [0, 1, 2 ** 32, 2 ** 52 + 5, -1, -(2 ** 40)]) {
      const tokens = derivedBlockTokens(id, 16);
      expect(tokens).toHaveLength(16);
      expect(tokens).toEqual(derivedBlockTokens(id, 16));
      for (const t of tokens) expect(Number.isInteger(t) && t >= 0 && t < DERIVED_TOKEN_VOCAB).toBe(true);
    }
    expect(derivedBlockTokens(1, 16)).not.toEqual(derivedBlockTokens(2, 16));
    expect(derivedBlockTokens(-1, 16)).not.toEqual(derivedBlockTokens(2 ** 32 - 1, 16));
  });
});

interface IndexedBlock {
  parent: bigint | null;
  tokens: number[];
}

/** The event-fed view: what a subscriber applying the decoded events holds. */
function apply(index: Map<bigint, IndexedBlock>, events: KvEvent[], blockSize: number): void {
  for (const event of events) {
    if (event.type === 'cleared') index.clear();
    else if (event.type === 'removed') for (const h of event.blockHashes) expect(index.delete(h), `${h}`).toBe(true);
    else {
      expect(event.blockSize).toBe(blockSize);
      expect(event.medium).toBe('GPU');
      expect(event.loraId).toBeNull();
      let parent = event.parentBlockHash;
      event.blockHashes.forEach((h, i) => {
        expect(index.has(h), `${h} stored twice`).toBe(false);
        index.set(h, { parent, tokens: event.tokenIds.slice(i * blockSize, (i + 1) * blockSize) });
        parent = h;
      });
    }
  }
}

describe.each(KV_EVENT_ENCODINGS)('engine model → events → %s encoding → decoder', (encoding) => {
  it('an index fed by the decoded events holds exactly the pool’s blocks, with their tokens and parents (randomized)', () => {
    const BS = 4;
    const rng = new Rng(encoding === 'map' ? 11 : 12);
    const engine = new EngineModel({ preset, blockSize: BS, capacityBlocks: 120 });
    const batches: PublishedKvEvent[][] = [];
    const events = new EngineKvEvents(BS, (batch) => batches.push(batch));
    engine.pool.listener = events;
    const index = new Map<bigint, IndexedBlock>();
    /** Every request's expected blocks: id → its tokens and parent, as the engine must publish them. */
    const expected = new Map<bigint, IndexedBlock>();
    // A few conversations whose turns extend each other, so prefixes are shared and evicted.
    const conversations: number[][] = Array.from({ length: 8 }, () => []);
    const unpack = new Unpackr({ useRecords: false, mapsAsObjects: true, int64AsType: 'bigint' });
    let now = 0;
    let id = 0;
    for (let round = 0; round < 300; round++) {
      const arrivals = rng.int(0, 2);
      for (let a = 0; a < arrivals; a++) {
        let request: EngineRequest;
        if (rng.chance(0.8)) {
          const conversation = conversations[rng.int(0, conversations.length - 1)]!;
          for (let t = rng.int(1, 30); t > 0; t--) conversation.push(rng.int(0, 1000));
          if (conversation.length > 150) conversation.splice(0, conversation.length, rng.int(0, 1000));
          const tokens = Uint32Array.from(conversation);
          const hashIds = tokenBlockIds(tokens, BS);
          request = { id: id++, hashIds, tokens, inputLength: tokens.length, outputLength: rng.int(1, 6) };
          hashIds.forEach((h, i) =>
            expected.set(u64(h), {
              parent: i === 0 ? null : u64(hashIds[i - 1]!),
              tokens: Array.from(tokens.subarray(i * BS, (i + 1) * BS)),
            }),
          );
        } else {
          // A trace request: hash_ids (some negative) and no tokens: derived tokens are published.
          const base = rng.int(-3, 3) * 1000;
          const hashIds = Array.from({ length: rng.int(1, 8) }, (_, i) => base + i);
          request = { id: id++, hashIds, inputLength: hashIds.length * BS + rng.int(0, BS - 1), outputLength: 2 };
          hashIds.forEach((h, i) =>
            expected.set(u64(h), { parent: i === 0 ? null : u64(hashIds[i - 1]!), tokens: derivedBlockTokens(h, BS) }),
          );
        }
        engine.submit(request, now);
      }
      const step = engine.step(now);
      if (step !== undefined) now = step.end;
      if (rng.chance(0.02) && engine.idle) engine.pool.resetPrefixCache();
      events.flushNow();
      for (const batch of batches.splice(0)) {
        const payload = encodeKvEventBatch(batch, now, encoding);
        const raw = unpack.unpack(payload) as unknown;
        // The encoding's shape: positional arrays, or maps with `type`.
        if (encoding === 'array') expect(Array.isArray(raw)).toBe(true);
        else expect((raw as { events: Array<{ type: string }> }).events[0]!.type).toMatch(/^Block|^AllBlocks/);
        const decoded = decodeKvEventBatch(payload);
        expect(decoded.unknownEvents).toBe(0);
        expect(decoded.dataParallelRank).toBe(0);
        apply(index, decoded.events, BS);
      }
      for (const [hash, block] of index) {
        expect(block).toEqual(expected.get(hash));
        expect(engine.pool.matchPrefix([Number(BigInt.asIntN(64, hash))])).toBe(1);
      }
      // And the other way: every block the pool holds under a name was announced.
      for (const hash of expected.keys())
        expect(index.has(hash), `${hash}`).toBe(engine.pool.matchPrefix([Number(BigInt.asIntN(64, hash))]) === 1);
    }
    expect(engine.pool.evictions).toBeGreaterThan(50);
  });
});
