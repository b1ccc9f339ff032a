/**
 * Shadow counters, observed state (max while fresh, ignored when stale),
 * tickets, and instances joining, draining and leaving at run time.
 */
import { describe, expect, it } from 'vitest';

import { Router } from '../src/index.js';
import { IMPLEMENTATIONS, thrown } from './helpers/routers.js';

const chain = (from: number, n: number) => Array.from({ length: n }, (_, k) => from + k);

describe.each(IMPLEMENTATIONS)('engine state ($impl)', ({ native }) => {
  const make = (instances: number | string[] = 2, extra = {}) =>
    new Router({
      instances,
      policy: 'round_robin',
      native,
      clock: 'manual',
      blockSize: 16,
      capacityBlocks: 1000,
      ...extra,
    });
  const shadowOf = (r: Router, k = 0) => r.stats().instances[k]!.shadow;

  it('moves shadow counters on dispatch, first token, completion and abort', () => {
    const r = make(1);
    r.complete(r.route({ hashIds: chain(1, 4) })); // 4 blocks cached
    const t = r.route({ hashIds: chain(1, 10), inputTokens: 150 });
    // 150 tokens, 4 blocks x 16 cached: 86 uncached.
    expect(shadowOf(r)).toEqual({ running: 0, waiting: 1, prefillTokens: 86, activeBlocks: 10 });
    r.onFirstToken(t);
    r.onFirstToken(t); // repeats are no-ops
    expect(shadowOf(r)).toEqual({ running: 1, waiting: 0, prefillTokens: 0, activeBlocks: 10 });
    r.complete(t);
    expect(shadowOf(r)).toEqual({ running: 0, waiting: 0, prefillTokens: 0, activeBlocks: 0 });
    const u = r.route({ hashIds: chain(1, 10) });
    r.abort(u);
    expect(r.stats().instances[0]).toMatchObject({ routed: 3, completed: 2, aborted: 1, shadow: { waiting: 0 } });
    expect(r.stats().inFlight).toBe(0);
    expect(r.checkInvariants()).toBe('');
  });

  it('a ticket closes once: a second complete, abort or first token is an error', () => {
    const r = make(1);
    const t = r.route({});
    r.complete(t);
    for (const use of [() => r.complete(t), () => r.abort(t), () => r.onFirstToken(t)]) {
      expect(thrown(use)).toMatchObject({ name: 'RangeError', code: 'ERR_KVROUTE_UNKNOWN_TICKET' });
    }
    for (const bogus of [-1, 1.5, 2 ** 60, 123_456_789]) {
      expect(thrown(() => r.complete(bogus)).code).toBe('ERR_KVROUTE_UNKNOWN_TICKET');
    }
    expect(thrown(() => r.complete('7' as unknown as number)).code).toBe('ERR_KVROUTE_INVALID_ARG_TYPE');
    // A reused slab index gets a new generation: the old ticket stays dead.
    const next = r.route({});
    expect(next).not.toBe(t);
    expect(thrown(() => r.complete(t)).code).toBe('ERR_KVROUTE_UNKNOWN_TICKET');
    r.complete(next);
  });

  it('many queued events in a row are all applied before the next decision', () => {
    const r = make(2, { policy: 'load_only' });
    const tickets = Array.from({ length: 1000 }, () => r.route({}));
    for (const t of tickets.slice(0, 700)) r.onFirstToken(t);
    for (const t of tickets.slice(0, 999)) r.complete(t);
    expect(r.stats().inFlight).toBe(1);
    expect(
      r
        .stats()
        .instances.map((s) => s.effective.numRequests)
        .sort(),
    ).toEqual([0, 1]);
    expect(r.checkInvariants()).toBe('');
  });

  it('uses observed state as max(shadow, observed) while fresh, and ignores it when stale', () => {
    const r = make(1, { stalenessMs: 2000 });
    r.setTime(10_000);
    r.route({ hashIds: chain(1, 4) }); // shadow: waiting 1
    r.setObservedState('engine-0', {
      timestampMs: 9_000,
      running: 5,
      waiting: 0,
      pendingPrefillTokens: 4096,
      decodeBatch: 4,
      kvBlocksUsed: 500,
      kvBlocksTotal: 1000,
    });
    const fresh = r.stats().instances[0]!;
    expect(fresh.observedFresh).toBe(true);
    expect(fresh.effective).toEqual({
      running: 5,
      waiting: 1, // the shadow's 1 beats the observed 0
      numRequests: 6,
      pendingPrefillTokens: 4096,
      decodeBatch: 4,
      kvUsage: 0.5,
    });
    r.setTime(11_000); // age 2,000 ms: still fresh (<=)
    expect(r.stats().instances[0]!.observedFresh).toBe(true);
    r.setTime(11_001);
    const stale = r.stats().instances[0]!;
    expect(stale.observedFresh).toBe(false);
    expect(stale.effective).toMatchObject({ running: 0, waiting: 1, numRequests: 1, pendingPrefillTokens: 64 });
  });

  it('ignores fields an observation does not report, and null clears it', () => {
    const r = make(1);
    r.setTime(100);
    r.route({ hashIds: chain(1, 4) });
    r.setObservedState('engine-0', { running: 3 }); // timestamp defaults to now
    expect(r.stats().instances[0]!.effective).toMatchObject({ running: 3, waiting: 1, pendingPrefillTokens: 64 });
    r.setObservedState('engine-0', null);
    expect(r.stats().instances[0]!.effective.running).toBe(0);
  });

  it('adds, drains and removes instances without touching the others', () => {
    const r = make(2);
    r.route({ hashIds: chain(1, 20) }); // engine-0
    const onOne = r.route({ hashIds: chain(100, 20) }); // engine-1
    const before = r.match({ hashIds: chain(1, 20) });
    r.addInstance('late', { capacityBlocks: 50 });
    expect(r.instances()).toEqual(['engine-0', 'engine-1', 'late']);
    expect(r.match({ hashIds: chain(1, 20) })).toEqual({ ...before, late: 0 });

    r.drainInstance('engine-1');
    const placed = [0, 1, 2, 3].map(() => {
      r.route({});
      return r.decision.instance;
    });
    expect(placed).not.toContain('engine-1');
    // A drained instance keeps its cache and finishes its in-flight work.
    expect(r.match({ hashIds: chain(100, 20) })['engine-1']).toBe(20);
    r.complete(onOne);
    expect(r.stats().instances[1]).toMatchObject({ drained: true, completed: 1 });
    // Resumed, it takes its round-robin turns again with its cache as it was.
    r.resumeInstance('engine-1');
    const resumed = [0, 1, 2].map(() => {
      r.route({});
      return r.decision.instance;
    });
    expect(resumed).toContain('engine-1');
    expect(r.match({ hashIds: chain(100, 20) })['engine-1']).toBe(20);
    expect(r.stats().instances[1]!.drained).toBe(false);
    r.drainInstance('engine-1');

    r.removeInstance('engine-0');
    expect(r.instances()).toEqual(['engine-1', 'late']);
    expect(r.match({ hashIds: chain(100, 20) })).toEqual({ 'engine-1': 20, late: 0 });
    // The freed slot is reused; the newcomer starts empty.
    r.addInstance('fresh');
    expect(r.instances()).toEqual(['fresh', 'engine-1', 'late']);
    expect(r.match({ hashIds: chain(1, 20) })).toEqual({ fresh: 0, 'engine-1': 0, late: 0 });
    expect(r.checkInvariants()).toBe('');
  });

  it('tickets of a removed instance stay valid and leave its successor alone', () => {
    const r = make(1);
    const t = r.route({ hashIds: chain(1, 8) });
    r.removeInstance('engine-0');
    r.addInstance('engine-0');
    r.onFirstToken(t);
    r.complete(t);
    expect(r.stats().instances[0]).toMatchObject({ completed: 0, shadow: { running: 0, waiting: 0, activeBlocks: 0 } });
    expect(r.checkInvariants()).toBe('');
  });

  it('with every instance drained or removed, route() throws ERR_KVROUTE_NO_INSTANCE', () => {
    const r = make(2);
    r.drainInstance('engine-0');
    r.removeInstance('engine-1');
    expect(thrown(() => r.route({}))).toMatchObject({ code: 'ERR_KVROUTE_NO_INSTANCE' });
    expect(r.explain({}).instance).toBeNull();
    const empty = make([]); // an empty router (a count of 0 is refused: router-first-hour.test.ts)
    expect(thrown(() => empty.route({})).code).toBe('ERR_KVROUTE_NO_INSTANCE');
  });

  it('explain(request) is a dry run; explain() describes the last route()', () => {
    const r = make(3, { policy: 'sticky' });
    const dry = r.explain({ session: 'x', hashIds: chain(1, 5) });
    expect(dry).toMatchObject({
      policy: 'sticky',
      instance: 'engine-0',
      reason: 'new_session',
      ticket: null,
      dryRun: true,
    });
    expect(r.stats()).toMatchObject({ inFlight: 0, sessions: 0 });
    expect(r.stats().instances[0]!.blocks).toBe(0);
    const t = r.route({ session: 'x', hashIds: chain(1, 5) });
    expect(r.explain()).toMatchObject({ instance: 'engine-0', reason: 'new_session', ticket: t, dryRun: false });
    // The terms are what the decision read: every instance idle, the 5 blocks uncached everywhere.
    // Without costs pushed, the price is token-equivalents: 1 per token, no overhead, the policy's batchWeight.
    const terms = {
      pendingPrefillTokens: 0,
      requests: 0,
      kvUsage: 0,
      uncachedTokens: 80,
      returningTokens: 0,
      prefillSecondsPerToken: 1,
      prefillOverheadSeconds: 0,
      interference: r.policy.batchWeight,
    };
    expect(r.explain().candidates).toEqual([
      { instance: 'engine-0', index: 0, drained: false, matchedBlocks: 0, matchedFrom: 'belief', score: 0, terms },
      { instance: 'engine-1', index: 1, drained: false, matchedBlocks: 0, matchedFrom: 'belief', score: 0, terms },
      { instance: 'engine-2', index: 2, drained: false, matchedBlocks: 0, matchedFrom: 'belief', score: 0, terms },
    ]);
    // match() does not disturb the last explanation.
    r.match({ hashIds: chain(1, 5) });
    expect(r.explain().candidates[0]!.matchedBlocks).toBe(0);
  });
});

describe('clock', () => {
  it('a real clock judges freshness against Date.now()', () => {
    const r = new Router({ instances: 1, native: true });
    r.setObservedState('engine-0', { running: 2 });
    expect(r.stats().instances[0]!.observedFresh).toBe(true);
    r.setObservedState('engine-0', { running: 2, timestampMs: Date.now() - 60_000 });
    expect(r.stats().instances[0]!.observedFresh).toBe(false);
    expect(thrown(() => r.setTime(5)).code).toBe('ERR_KVROUTE_INVALID_ARG_VALUE');
  });
});

describe('choosing the implementation', () => {
  it('KVROUTE_NATIVE=0 selects the TypeScript reference unless native is asked for', async () => {
    const { spawnSync } = await import('node:child_process');
    const index = new URL('../dist/index.js', import.meta.url).href;
    const script = `
      import { Router, hashPrompt } from ${JSON.stringify(index)};
      console.log(JSON.stringify({
        byDefault: new Router({ instances: 1 }).native,
        forced: new Router({ instances: 1, native: true }).native,
        hash: hashPrompt('abc').join(),
      }));`;
    const run = (env: Record<string, string>) =>
      JSON.parse(
        spawnSync(process.execPath, ['--input-type=module', '-e', script], {
          encoding: 'utf8',
          env: { ...process.env, ...env },
        }).stdout,
      );
    const reference = run({ KVROUTE_NATIVE: '0' });
    const native = run({ KVROUTE_NATIVE: '1' });
    expect(reference).toMatchObject({ byDefault: false, forced: true });
    expect(native).toMatchObject({ byDefault: true, forced: true });
    expect(reference.hash).toBe(native.hash);
    expect(new Router({ instances: 1, native: false }).stats().native).toBe(false);
  });
});
