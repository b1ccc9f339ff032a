/**
 * The public Router with event-fed instances: token-keyed requests match what the engine's KV
 * events say it holds (explain() says so per candidate), instances without events keep their
 * belief index, stats() shows each feed, a dead publisher falls back to the belief index, and bad
 * endpoints and token ids are refused naming the field. Real ZeroMQ sockets on loopback.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { Router } from '../src/core/router.js';
import { subscribeKvEvents } from '../src/events/kv-event-subscription.js';
import { KvEventPublisher } from '../src/sim/kv-event-publisher.js';
import { block, prompt, storedThree } from './helpers/kv-prompt.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: () => boolean, ms = 10_000): Promise<void> {
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

for (const native of [true, false]) {
  describe(`Router with KV events (${native ? 'addon' : 'reference'})`, () => {
    it('matches token-keyed requests against the events, and falls back when the publisher dies', async () => {
      const pub = await KvEventPublisher.start({ endpoint: 'tcp://127.0.0.1:*', encoding: 'map' });
      open.push(pub);
      const warnings: string[] = [];
      const router = new Router({ instances: ['fed', 'plain'], native, onWarning: (w) => warnings.push(w) });
      subscribeKvEvents(router, 'fed', { endpoint: pub.endpoint });
      open.push(router);
      const fed = () => router.stats().instances.find((i) => i.instance === 'fed')!.kvEvents!;
      await until(() => fed().fed);
      // The engine stores 3 of the prompt's blocks (ids are the engine's own hashes).
      const stored = () => pub.publish(storedThree);
      // A SUB socket misses what precedes its joining: publish until the index has it (bounded).
      for (let k = 0; k < 200 && fed().heldKeys < 3; k++) {
        stored();
        await sleep(10);
      }
      expect(fed()).toMatchObject({ state: 'live', fed: true, heldKeys: 3, engineBlocks: 3 });
      const explanation = router.explain({ tokens: prompt, session: 's' });
      expect(explanation.keys).toBe('tokens');
      const byName = Object.fromEntries(explanation.candidates.map((c) => [c.instance, c]));
      expect(byName.fed).toMatchObject({ matchedBlocks: 3, matchedFrom: 'events' });
      expect(byName.plain).toMatchObject({ matchedBlocks: 0, matchedFrom: 'belief' });
      expect(explanation.instance).toBe('fed');
      // The engine evicts the middle block: vLLM's prefix rule stops the match before it.
      pub.publish([{ type: 'BlockRemoved', blockHashes: [12] }]);
      await until(() => fed().removed === 1);
      expect(router.match({ tokens: prompt })).toEqual({ fed: 1, plain: 0 });
      // A request keyed by text never reads the event index.
      expect(router.explain({ prompt: 'hello' }).candidates.every((c) => c.matchedFrom === 'belief')).toBe(true);

      await pub.close();
      await until(() => !fed().fed);
      expect(fed().state).toBe('down');
      expect(warnings.join('\n')).toMatch(/instance fed: kv events tcp:.*disconnected; routing on the belief index/);
      expect(router.explain({ tokens: prompt }).candidates[0]!.matchedFrom).toBe('belief');
    });

    it('counts an unfinished request routed to an event-fed instance as holding its prefix there', async () => {
      const pub = await KvEventPublisher.start({ endpoint: 'tcp://127.0.0.1:*', encoding: 'map' });
      open.push(pub);
      const router = new Router({ instances: ['fed'], native });
      subscribeKvEvents(router, 'fed', { endpoint: pub.endpoint });
      open.push(router);
      await until(() => router.stats().instances[0]!.kvEvents!.fed);
      // Nothing stored: a first request matches nothing.
      expect(router.match({ tokens: prompt })).toEqual({ fed: 0 });
      const first = router.route({ tokens: prompt });
      // The engine has not stored the prompt yet (no events), but a sub-agent sent now will be
      // scheduled behind the first request and find its 4 full blocks.
      expect(router.match({ tokens: prompt })).toEqual({ fed: 4 });
      expect(router.explain({ tokens: prompt.subarray(0, 40) }).candidates[0]).toMatchObject({
        matchedBlocks: 2,
        matchedFrom: 'events',
      });
      // Still not reported held by the engine.
      expect(router.stats().instances[0]!.kvEvents!.heldKeys).toBe(0);
      router.abort(first);
      expect(router.match({ tokens: prompt })).toEqual({ fed: 0 });
      // Finished requests leave the events alone to decide: the engine says it kept 2 blocks.
      const second = router.route({ tokens: prompt });
      for (let k = 0; k < 200 && router.stats().instances[0]!.kvEvents!.heldKeys < 2; k++) {
        pub.publish([
          {
            type: 'BlockStored',
            blockHashes: [21, 22],
            parentBlockHash: null,
            tokenIds: [...block(0), ...block(1)],
            blockSize: 16,
          },
        ]);
        await sleep(10);
      }
      expect(router.match({ tokens: prompt })).toEqual({ fed: 4 });
      router.complete(second);
      expect(router.match({ tokens: prompt })).toEqual({ fed: 2 });
    });

    it('refuses bad endpoints and token ids, naming the field', () => {
      const router = new Router({ instances: ['a'], native });
      router.addInstance('b');
      expect(() => subscribeKvEvents(router, 'b', { endpoint: 'http://x:1' })).toThrow(
        /kvEvents of "b" must be a ZeroMQ endpoint, tcp:\/\/HOST:PORT/,
      );
      expect(() => subscribeKvEvents(router, 'b', { endpoint: 'tcp://x:1', replay: 'x' })).toThrow(
        /kvReplay of "b" must be a ZeroMQ endpoint/,
      );
      router.removeInstance('b');
      // The kvEvents instance option moved out of the core: refused, naming the new way.
      expect(() => router.addInstance('b', { kvEvents: 'tcp://x:1' } as never)).toThrow(
        /options of "b"\.kvEvents is no longer a Router option: .*subscribeKvEvents\(router, id/,
      );
      expect(() => new Router({ instances: [{ id: 'c', kvReplay: 'tcp://x:1' } as never], native })).toThrow(
        /options\.instances\[0\]\.kvReplay is no longer a Router option/,
      );
      expect(() => router.route({ tokens: [1, -2] })).toThrow(
        /request\.tokens\[1\] must be a token id in \[0, 2\^32\), got -2/,
      );
      expect(() => router.route({ tokens: [1], prompt: 'x' })).toThrow(/at most one of .*request\.tokens/);
      expect(() => router.route({ tokens: [1], blockTokens: 4 })).toThrow(
        /request\.tokens are keyed at the router's blockSize/,
      );
      // Without events, tokens still route (on the belief index), keyed by token blocks.
      router.route({ tokens: Array.from(prompt), session: 's' });
      expect(router.match({ tokens: prompt })).toEqual({ a: 4 });
      expect(router.stats().instances[0]!.kvEvents).toBeNull();
    });
  });
}
