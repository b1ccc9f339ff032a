/**
 * applyKvEvents: KV events an embedder hands the router itself (docs/kv-events.md, "Events
 * from elsewhere"). Token-keyed requests then match what the events say the engine holds, in
 * either of vLLM's encodings or as a msgpack payload; a malformed call names its field and applies
 * nothing; an instance with its own subscription is refused; a removed instance's slot starts
 * unfed. The addon and the TypeScript reference answer a random stream of events identically.
 */
import { describe, expect, it } from 'vitest';

import { Router } from '../src/core/router.js';
import { applyKvEvents } from '../src/events/direct-kv-events.js';
import { subscribeKvEvents } from '../src/events/kv-event-subscription.js';
import { encodeKvEventBatch, wireEvent, type PublishedKvEvent } from '../src/sim/kv-event-encoding.js';
import { SynthRandom } from '../src/trace/synth-random.js';
import { block, prompt, storedThree } from './helpers/kv-prompt.js';

function thrown(call: () => unknown): Error & { code?: string } {
  try {
    call();
  } catch (error) {
    return error as Error & { code?: string };
  }
  throw new Error('expected a throw');
}

for (const native of [true, false]) {
  describe(`applyKvEvents (${native ? 'addon' : 'reference'})`, () => {
    it('feeds the instance from the events it is handed, in every form vLLM sends them', () => {
      for (const form of ['map', 'array', 'payload'] as const) {
        const router = new Router({ instances: ['fed', 'plain'], native });
        const input =
          form === 'payload'
            ? encodeKvEventBatch(storedThree, 1.5, 'map')
            : storedThree.map((event) => wireEvent(event, form));
        expect(applyKvEvents(router, 'fed', input)).toEqual({ events: 2, unknownEvents: 0 });
        const explanation = router.explain({ tokens: prompt, session: 's' });
        const byName = Object.fromEntries(explanation.candidates.map((c) => [c.instance, c]));
        expect(byName.fed).toMatchObject({ matchedBlocks: 3, matchedFrom: 'events' });
        expect(byName.plain).toMatchObject({ matchedBlocks: 0, matchedFrom: 'belief' });
        expect(explanation.instance).toBe('fed');
        // Eviction of the middle block: vLLM's prefix rule stops the match before it.
        applyKvEvents(router, 'fed', [
          wireEvent({ type: 'BlockRemoved', blockHashes: [12] }, form === 'array' ? 'array' : 'map'),
        ]);
        expect(router.match({ tokens: prompt })).toEqual({ fed: 1, plain: 0 });
        applyKvEvents(router, 'fed', [{ type: 'AllBlocksCleared' }]);
        expect(router.match({ tokens: prompt })).toEqual({ fed: 0, plain: 0 });
      }
    });

    it('reads the events, not its own dispatches, once fed (an empty call feeds it)', () => {
      const router = new Router({ instances: ['a'], native });
      router.route({ tokens: prompt });
      expect(router.match({ tokens: prompt })).toEqual({ a: 4 }); // the belief: its own dispatch
      expect(applyKvEvents(router, 'a', [])).toEqual({ events: 0, unknownEvents: 0 });
      expect(router.explain({ tokens: prompt }).candidates[0]).toMatchObject({
        matchedBlocks: 0,
        matchedFrom: 'events',
      });
    });

    it('skips and counts event types it does not know', () => {
      const router = new Router({ instances: ['a'], native });
      const events = [{ type: 'BlockPinned', block_hashes: [1] }, wireEvent(storedThree[0]!, 'map')];
      expect(applyKvEvents(router, 'a', events)).toEqual({ events: 1, unknownEvents: 1 });
      expect(router.match({ tokens: prompt })).toEqual({ a: 2 });
    });

    it('refuses a malformed call naming the field, and applies none of it', () => {
      const router = new Router({ instances: ['a'], native });
      const good = wireEvent(storedThree[0]!, 'map');
      const cases: Array<[unknown, RegExp]> = [
        [
          [good, { type: 'BlockStored', block_hashes: [5], parent_block_hash: 12, token_ids: [1, 2], block_size: 16 }],
          /events\[1\]\.token_ids: must be block_size × the number of block_hashes tokens/,
        ],
        [
          [good, { type: 'BlockRemoved', block_hashes: 'x' }],
          /events\[1\]\.block_hashes: must be an array of block hashes/,
        ],
        [
          [good, { type: 'BlockStored', block_hashes: [5], token_ids: [...block(0).slice(1), -1], block_size: 16 }],
          /events\[1\]\.token_ids\[15\]: must be a token id/,
        ],
        [
          [good, { type: 'BlockStored', block_hashes: [1.5], token_ids: block(0), block_size: 16 }],
          /events\[1\]\.block_hashes\[0\]: must be an integer block hash/,
        ],
        [[good, 7], /events\[1\]: must be an event/],
        [Uint8Array.of(0x92, 0x01), /payload: not msgpack/],
      ];
      for (const [input, message] of cases) {
        const error = thrown(() => applyKvEvents(router, 'a', input as unknown[]));
        expect(error.code).toBe('ERR_KVROUTE_KV_EVENT');
        expect(error.message).toMatch(message);
        expect(router.match({ tokens: prompt })).toEqual({ a: 0 }); // the good event was not applied
      }
      const notEvents = thrown(() => applyKvEvents(router, 'a', 'BlockStored' as unknown as unknown[]));
      expect(notEvents).toBeInstanceOf(TypeError);
      expect(notEvents.message).toMatch(
        /events must be a msgpack KVEventBatch payload \(Uint8Array\) or an array of events/,
      );
      expect(thrown(() => applyKvEvents(router, 'nope', [])).code).toBe('ERR_KVROUTE_UNKNOWN_INSTANCE');
    });

    it('refuses an instance fed by its own subscription', async () => {
      const router = new Router({ instances: ['sub'], native, onWarning: () => {} });
      subscribeKvEvents(router, 'sub', { endpoint: 'tcp://127.0.0.1:9' });
      try {
        const error = thrown(() => applyKvEvents(router, 'sub', []));
        expect(error.code).toBe('ERR_KVROUTE_KV_EVENT');
        expect(error.message).toMatch(/instance "sub" is fed by its own kvEvents subscription/);
      } finally {
        await router.close();
      }
    });

    it('starts a new instance on a removed one’s slot unfed', () => {
      const router = new Router({ instances: ['a'], native });
      applyKvEvents(
        router,
        'a',
        storedThree.map((event) => wireEvent(event, 'map')),
      );
      router.removeInstance('a');
      router.addInstance('b');
      expect(router.explain({ tokens: prompt }).candidates[0]).toMatchObject({ instance: 'b', matchedFrom: 'belief' });
    });
  });
}

describe('applyKvEvents, addon against reference', () => {
  it('answers the same matches after the same random stream of stores, evictions and clears', () => {
    const random = new SynthRandom(7);
    const pick = (n: number) => Math.floor(random.next() * n);
    const routers = [true, false].map((native) => new Router({ instances: ['a', 'b', 'c'], native }));
    // Prompts share prefixes: block k of prompt p is one of a few variants, so chains branch.
    const blockTokens = (variant: number, k: number) =>
      Array.from({ length: 16 }, (_, i) => variant * 1000 + k * 16 + i);
    const prompts = Array.from({ length: 12 }, () => Array.from({ length: 1 + pick(8) }, () => pick(3)));
    const engineId = (p: number[], k: number) => p.slice(0, k + 1).reduce((h, v) => (h * 7 + v + 1) % 1_000_003, k + 1);
    for (let round = 0; round < 400; round++) {
      const instance = ['a', 'b', 'c'][pick(3)]!;
      const p = prompts[pick(prompts.length)]!;
      const roll = random.next();
      let events: PublishedKvEvent[];
      if (roll < 0.6) {
        const from = pick(p.length);
        const ids = p.slice(from).map((_, i) => engineId(p, from + i));
        events = [
          {
            type: 'BlockStored',
            blockHashes: ids,
            parentBlockHash: from === 0 ? null : engineId(p, from - 1),
            tokenIds: p.slice(from).flatMap((v, i) => blockTokens(v, from + i)),
            blockSize: 16,
          },
        ];
      } else if (roll < 0.97) events = [{ type: 'BlockRemoved', blockHashes: [engineId(p, pick(p.length))] }];
      else events = [{ type: 'AllBlocksCleared' }];
      const unpacked = events.map((event) => wireEvent(event, 'map'));
      for (const router of routers) applyKvEvents(router, instance, unpacked);
      const query = prompts[pick(prompts.length)]!;
      const tokens = Uint32Array.from(query.flatMap((v, k) => blockTokens(v, k)));
      const [native, reference] = routers.map((router) => router.match({ tokens }));
      expect(native, `round ${round}`).toEqual(reference);
    }
    expect(routers[0]!.checkInvariants()).toBe('');
  });
});
