/**
 * Two of issue 29's first-hour items on the public Router, on both cores: a count of 0 instances
 * is refused naming the field (an empty router refuses every route), and the README's pattern
 * reads `router.decision.instance` as a string after a successful route(), without `!` (checked
 * by `tsc -p tsconfig.json --noEmit`, part of `npm run lint`).
 */
import { describe, expect, expectTypeOf, it } from 'vitest';

import { Router } from '../src/index.js';

for (const native of [true, false]) {
  describe(`Router (${native ? 'addon' : 'reference'})`, () => {
    it('refuses instances: 0, naming the field and the way to start empty', () => {
      expect(() => new Router({ instances: 0, native })).toThrow(
        /options\.instances must be a count of at least 1 .*\(\[\] to add them later with addInstance\), got 0/,
      );
      try {
        new Router({ instances: 0, native });
      } catch (error) {
        expect((error as { code?: string }).code).toBe('ERR_KVROUTE_INVALID_ARG_VALUE');
      }
      expect(() => new Router({ instances: -1, native })).toThrow(/options\.instances must be an integer in \[1, /);
      // An empty list still makes a router to fill later (the proxy starts this way).
      const empty = new Router({ instances: [], native });
      empty.addInstance('a');
      empty.route({ prompt: 'x' });
      expect(empty.decision.instance).toBe('a');
    });

    it('types decision.instance as a string: the README pattern needs no `!`', () => {
      const router = new Router({ instances: 2, native });
      const send = (url: string): string => url;
      const ticket = router.route({ messages: [{ role: 'user', content: 'hi' }], session: 'conv-42' });
      expectTypeOf(router.decision.instance).toEqualTypeOf<string>();
      expect(send(router.decision.instance)).toMatch(/^engine-[01]$/);
      router.onFirstToken(ticket);
      router.complete(ticket);
      // No instance chosen (before any route(), or once removed): '' rather than a missing id.
      const fresh = new Router({ instances: ['a'], native });
      expect(fresh.decision.instance).toBe('');
      fresh.route({ prompt: 'y' });
      fresh.removeInstance('a');
      expect(fresh.decision.instance).toBe('');
    });
  });
}
