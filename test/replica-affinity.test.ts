/**
 * Session affinity across router replicas (issue #19): two proxies, each with its own router, in
 * front of the same simulated engines, as two `kvroute serve` replicas behind an L4 balancer.
 * One session's turns alternate between the replicas through the official `openai` client.
 *
 * The replica that did not see a turn has no cache belief for the session and its own load picture.
 * To make that deterministic, replica B carries one in-flight request of another session on the
 * engine the session's first turn went to. Plain `min_ttft` on B then moves the second turn off
 * that engine (the split the issue is about); with `ringFirstTurn` B sends the session, new to
 * it, to its ring instance, which is where replica A put its first turn, so every turn lands on
 * one engine. Many sessions still spread over the engines.
 */
import OpenAI from 'openai';
import { afterEach, describe, expect, it } from 'vitest';

import type { PolicyName, PolicySpec } from '../src/core/types.js';
import type { Router } from '../src/index.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { MODEL, startProxy, type ProxyRig } from './helpers/proxy-harness.js';

const ENGINES = 4;
const RING: PolicySpec = { name: 'min_ttft', ringFirstTurn: 1 };

interface Replicas {
  fleet: SimFleet;
  a: ProxyRig;
  b: ProxyRig;
}

let running: Replicas | undefined;
afterEach(async () => {
  if (running === undefined) return;
  await Promise.all([running.a.close(), running.b.close()]);
  await running.fleet.close();
  running = undefined;
});

/** ENGINES simulated engines and two proxies in front of them, both routing with `policy`. */
async function startReplicas(policy: PolicyName | PolicySpec): Promise<Replicas> {
  const fleet = await startSimFleet({ instances: ENGINES, port: 0, speed: 50 });
  running = { fleet } as Replicas;
  // Each replica learns its own per-instance prices and its own sessions between turns from its
  // own traffic (docs/scale-out.md), and on these short prompts their differences outweigh a
  // turn's cache: a session could then move. This test is about the ring and the cache, so both
  // price with the preset's fixed costs and count no returning sessions.
  const options = { backends: fleet.urls, policy, costs: 'fixed', sessionReturns: false } as const;
  running.a = await startProxy(options);
  running.b = await startProxy(options);
  return running;
}

/** A chat conversation: each turn sends the whole history plus a new user message. */
class Conversation {
  private readonly messages: OpenAI.ChatCompletionMessageParam[] = [];
  constructor(readonly session: string) {}

  /**
   * One turn through `client`; resolves with the engine and reason the replica reported, and the
   * prompt tokens the engine itself found cached (its own evidence of where the history is).
   */
  async turn(client: OpenAI, words = 120): Promise<{ instance: string; reason: string; cached: number }> {
    const turn = this.messages.length / 2 + 1;
    this.messages.push({ role: 'user', content: `${this.session} turn ${turn}: ${'lorem ipsum '.repeat(words)}` });
    const { data, response } = await client.chat.completions
      .create({ model: MODEL, messages: this.messages, max_tokens: 4 }, { headers: { 'x-session-id': this.session } })
      .withResponse();
    this.messages.push({ role: 'assistant', content: data.choices[0]!.message.content ?? '' });
    return {
      instance: response.headers.get('x-kvroute-instance')!,
      reason: response.headers.get('x-kvroute-reason')!,
      cached: data.usage?.prompt_tokens_details?.cached_tokens ?? 0,
    };
  }
}

/**
 * Opens a ticket on `router` for a short request of another session that the router would place
 * on `instance` (found by dry runs), and leaves it in flight: that replica now counts one request
 * there. Returns the ticket.
 */
function holdLoadOn(router: Router, instance: string): number {
  for (let k = 0; k < 1000; k += 1) {
    const request = { model: MODEL, prompt: 'hi', session: `other-${k}` };
    if (router.explain(request).instance !== instance) continue;
    return router.route(request);
  }
  throw new Error(`no session among 1,000 lands on ${instance}`);
}

/** Turns 1..turns of `conversation`, alternating replicas A and B, B carrying load on turn 1's engine for turn 2. */
async function alternate(r: Replicas, conversation: Conversation, turns: number) {
  const seen = [await conversation.turn(r.a.client)];
  const held = holdLoadOn(r.b.proxy.router, seen[0]!.instance);
  seen.push(await conversation.turn(r.b.client));
  r.b.proxy.router.complete(held);
  for (let t = 3; t <= turns; t += 1) seen.push(await conversation.turn(t % 2 === 1 ? r.a.client : r.b.client));
  return seen;
}

describe('two router replicas in front of the same engines', () => {
  it('with ringFirstTurn, a session alternating between the replicas stays on one engine', async () => {
    const r = await startReplicas(RING);
    const seen = await alternate(r, new Conversation('session-alpha'), 6);
    expect(new Set(seen.map((s) => s.instance))).toEqual(new Set([seen[0]!.instance]));
    expect(r.fleet.urls).toContain(seen[0]!.instance);
    // The first turn each replica sees is placed by the ring; the later ones by min_ttft, on the cache.
    expect(seen[0]!.reason).toBe('ring_first_turn');
    expect(seen[1]!.reason).toBe('ring_first_turn');
    for (const later of seen.slice(2)) expect(later.reason).not.toBe('ring_first_turn');
    // The engine found each later turn's history in its cache: they really met one engine.
    for (const later of seen.slice(1)) expect(later.cached).toBeGreaterThan(0);
    for (const rig of [r.a, r.b]) {
      expect(rig.proxy.router.stats().inFlight).toBe(0);
      expect(rig.proxy.router.checkInvariants()).toBe('');
    }
  });

  it('without it, the replica that did not see the first turn moves the session off its engine', async () => {
    const r = await startReplicas('min_ttft');
    const seen = await alternate(r, new Conversation('session-alpha'), 2);
    expect(seen[1]!.instance).not.toBe(seen[0]!.instance);
    // … where the engine recomputes the history the first turn left on the other one.
    expect(seen[1]!.cached).toBe(0);
  });

  it('with ringFirstTurn, sessions spread over the engines, each on one engine whichever replica gets it', async () => {
    const r = await startReplicas(RING);
    const conversations = Array.from({ length: 12 }, (_, k) => new Conversation(`spread-${k}`));
    const engineOf = new Map<string, Set<string>>();
    for (let turn = 0; turn < 3; turn += 1) {
      for (const [k, c] of conversations.entries()) {
        // Session k starts on replica k % 2 and alternates from there.
        const { instance } = await c.turn((k + turn) % 2 === 0 ? r.a.client : r.b.client, 40);
        engineOf.set(c.session, (engineOf.get(c.session) ?? new Set()).add(instance));
      }
    }
    for (const engines of engineOf.values()) expect(engines.size).toBe(1);
    const used = new Set([...engineOf.values()].map((e) => [...e][0]!));
    expect(used.size).toBeGreaterThan(1);
  });
});
