/**
 * Randomized differential test of the event-fed index: the addon and the TypeScript reference,
 * fed the same generated vLLM-like event streams (stored chains from the root and from known
 * parents, orphans, aliases sharing a key, re-stores, removals of known and unknown hashes, other
 * media, adapters, clears) over several instances (more than 56 in one scenario), interleaved
 * with routes and matches flagged FLAG_TOKEN_KEYS (and not; dry runs too), completions and
 * aborts, the fed switch, clearKvEvents and instances replaced. Every decision, matched[] and score
 * must agree, every event-fed slot's match must equal an independent engine model's prediction
 * (what the engine holds, or a request routed there and not yet finished holds), and the counters
 * and invariants must agree throughout.
 */
import { describe, expect, it } from 'vitest';

import { EVENT_STAT_FIELDS, EventStat, FLAG_DRY_RUN, FLAG_TOKEN_KEYS } from '../src/core/core-router.js';
import { KvEventPacker } from '../src/events/packed-kv-events.js';
import type { PolicyName } from '../src/index.js';
import { makeCore, setRequest, type CoreUnderTest } from './helpers/core-twins.js';
import { EngineModel, conversations } from './helpers/kv-event-gen.js';
import { Rng } from './helpers/random.js';

interface Scenario {
  seed: number;
  slots: number;
  steps: number;
  policy: PolicyName;
  blockSize: number;
  capacityBlocks: number;
}

function runScenario(sc: Scenario) {
  const rng = new Rng(sc.seed);
  const convs = conversations(rng, sc.blockSize);
  const cores = [
    makeCore(true, { policy: sc.policy, blockTokens: sc.blockSize }),
    makeCore(false, { policy: sc.policy, blockTokens: sc.blockSize }),
  ];
  const [native, reference] = cores as [CoreUnderTest, CoreUnderTest];
  const both = <T>(fn: (c: CoreUnderTest) => T): [T, T] => [fn(native), fn(reference)];
  const engines: EngineModel[] = [];
  const fed: boolean[] = [];
  for (let s = 0; s < sc.slots; s++) {
    const [a, b] = both((c) => c.core.addInstance(`engine-${s}`, sc.capacityBlocks));
    expect(a).toBe(s);
    expect(b).toBe(s);
    engines.push(new EngineModel(s, convs, sc.blockSize));
    fed.push(rng.chance(0.7));
    both((c) => c.core.setEventFed(s, fed[s]!));
  }
  let now = 1_000_000;
  const open: number[] = [];
  /** Open tickets' in-flight holds: the slot, its keys and the engine's epoch at dispatch. */
  const holds = new Map<number, { slot: number; keys: bigint[]; epoch: number }>();
  const packer = new KvEventPacker(2, 16);
  const tally = { routes: 0, fedMatches: 0, nonZeroFedMatches: 0, events: 0, inFlightMatches: 0 };
  const statsOf = (c: CoreUnderTest, s: number) => {
    const out = new Float64Array(EVENT_STAT_FIELDS);
    c.core.eventStats(s, out);
    return Array.from(out);
  };
  const checkAll = (step: number) => {
    for (let s = 0; s < sc.slots; s++) {
      const [a, b] = both((c) => statsOf(c, s));
      expect(a, `step ${step} slot ${s} event stats`).toEqual(b);
      const m = engines[s]!;
      expect(a[EventStat.HeldKeys], `slot ${s} held keys`).toBe(m.refs.size);
      expect(a[EventStat.EngineBlocks]).toBe(m.held.size);
      const c = m.counters;
      expect(a.slice(0, 6)).toEqual([c.stored, c.removed, c.cleared, c.ignored, c.orphaned, c.unknownRemoved]);
    }
    expect(both((c) => c.core.checkInvariants())).toEqual(['', '']);
  };

  for (let step = 0; step < sc.steps; step++) {
    const r = rng.next();
    if (r < 0.45) {
      // A tick's messages for one engine, coalesced into one call.
      const s = rng.int(0, sc.slots - 1);
      packer.reset();
      for (let m = rng.int(1, 3); m > 0; m--) packer.addEvents(engines[s]!.events(rng, 5));
      tally.events += packer.events;
      both((c) => c.core.applyKvEvents(s, packer));
    } else if (r < 0.85) {
      const conv = rng.pick(convs);
      const n = rng.int(0, conv.keys.length);
      const ids = BigUint64Array.from(conv.keys.slice(0, n));
      const inputTokens = rng.pick([
        NaN,
        n * sc.blockSize + rng.int(0, 2 * sc.blockSize),
        rng.int(0, 3 * sc.blockSize),
      ]);
      const tokenKeys = rng.chance(0.9);
      const dry = rng.chance(0.1);
      const flags = (tokenKeys ? FLAG_TOKEN_KEYS : 0) | (dry ? FLAG_DRY_RUN : 0);
      const isRoute = rng.chance(0.75);
      const session = rng.chance(0.5) ? `s${rng.int(0, 20)}` : undefined;
      const results = both((c) => {
        setRequest(c, { inputTokens, flags });
        const ticket = isRoute ? c.core.route(ids, session) : (c.core.match(ids), -2);
        return {
          ticket,
          decision: isRoute ? Array.from(c.buffers.decision) : [],
          matched: Array.from(c.matched.subarray(0, sc.slots)),
          scores: isRoute ? Array.from(c.scores.subarray(0, sc.slots)) : [],
        };
      });
      expect(results[0], `step ${step}`).toEqual(results[1]);
      const { ticket, matched, decision } = results[0];
      if (isRoute) tally.routes += 1;
      if (tokenKeys) {
        const prompt = Number.isNaN(inputTokens) ? n * sc.blockSize : inputTokens;
        for (let s = 0; s < sc.slots; s++) {
          if (!fed[s]) continue;
          const keys = conv.keys.slice(0, n);
          expect(matched[s], `step ${step} slot ${s}: the engine model's prediction`).toBe(
            engines[s]!.predict(keys, prompt),
          );
          tally.fedMatches += 1;
          if (matched[s]! > 0) tally.nonZeroFedMatches += 1;
          if (matched[s]! > engines[s]!.match(keys, prompt)) tally.inFlightMatches += 1;
        }
      }
      if (ticket >= 0) {
        open.push(ticket);
        // Decided after the match above: the request holds its keys from now on.
        const slot = decision[0]!;
        if (tokenKeys && fed[slot]) {
          const keys = conv.keys.slice(0, n);
          engines[slot]!.holdInFlight(keys, 1);
          holds.set(ticket, { slot, keys, epoch: engines[slot]!.epoch });
        }
      }
    } else if (r < 0.92 && open.length > 0) {
      const ticket = open.splice(rng.int(0, open.length - 1), 1)[0]!;
      const abort = rng.chance(0.3);
      expect(both((c) => (abort ? c.core.abort(ticket) : c.core.complete(ticket)))).toEqual([true, true]);
      const h = holds.get(ticket);
      holds.delete(ticket);
      if (h !== undefined && engines[h.slot]!.epoch === h.epoch) engines[h.slot]!.holdInFlight(h.keys, -1);
    } else if (r < 0.95) {
      const s = rng.int(0, sc.slots - 1);
      fed[s] = !fed[s];
      both((c) => c.core.setEventFed(s, fed[s]!));
    } else if (r < 0.97) {
      const s = rng.int(0, sc.slots - 1);
      engines[s]!.clear();
      both((c) => c.core.clearKvEvents(s));
    } else if (r < 0.98) {
      // An instance replaced: its event state starts over, not fed.
      const s = rng.int(0, sc.slots - 1);
      both((c) => c.core.removeInstance(s));
      expect(both((c) => c.core.addInstance(`engine-${s}-again`, sc.capacityBlocks))).toEqual([s, s]);
      engines[s]!.reset();
      fed[s] = false;
    } else {
      now += rng.int(1, 500);
      both((c) => c.core.setTime(now));
    }
    if (step % 100 === 99) checkAll(step);
  }
  checkAll(sc.steps);
  return tally;
}

describe('event-fed index: addon against reference and an engine model', () => {
  it.each<Scenario>([
    { seed: 1, slots: 6, steps: 2500, policy: 'min_ttft', blockSize: 4, capacityBlocks: 48 },
    { seed: 2, slots: 4, steps: 1500, policy: 'unified', blockSize: 16, capacityBlocks: 200 },
    { seed: 3, slots: 60, steps: 1500, policy: 'lmetric', blockSize: 4, capacityBlocks: 64 },
    { seed: 4, slots: 70, steps: 1200, policy: 'min_ttft', blockSize: 2, capacityBlocks: 32 },
  ])('seed $seed: $slots instances, $policy, block size $blockSize', (sc) => {
    const tally = runScenario(sc);
    // The streams exercised what they should: many events, routed requests, real matches.
    expect(tally.events).toBeGreaterThan(sc.steps);
    expect(tally.routes).toBeGreaterThan(sc.steps / 4);
    expect(tally.nonZeroFedMatches).toBeGreaterThan(tally.fedMatches / 10);
    // Some matches reached past what the engine held, on an in-flight request's keys.
    expect(tally.inFlightMatches).toBeGreaterThan(10);
  });
});
