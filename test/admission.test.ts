/**
 * Admission control (--max-in-flight): the Admission queue against a plain model under random
 * operations, a queue that drains without recursing, and the proxy in front of an engine that
 * holds its answers: at most N forwarded at once, the rest queued in order, 429 with Retry-After
 * when the queue is full or the wait runs out, a queued request whose client leaves never sent.
 */
import type { ServerResponse } from 'node:http';

import { describe, expect, it } from 'vitest';

import { Admission, type AdmissionLimits, type Admittable } from '../src/proxy/exchange/admission.js';
import { resolveFlowConfig } from '../src/flow/flow-config.js';
import { ClientError } from '../src/proxy/server/error-body.js';
import { createProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import { resolveServeConfig, ConfigError } from '../src/cli/serve-config.js';

import { MODEL, post, refusingUrl, startProxy, startStub } from './helpers/proxy-harness.js';
import { Rng } from './helpers/random.js';
import { waitFor } from './helpers/wait-for.js';

class Waiter implements Admittable {
  admitted = 0;
  expired: ClientError | undefined;
  constructor(
    readonly id: number,
    private readonly onAdmit: (w: Waiter) => void = () => {},
  ) {}
  admit(): void {
    this.admitted++;
    this.onAdmit(this);
  }
  expire(error: ClientError): void {
    this.expired = error;
  }
}

/** One tenant, one class: flow control's queue is the plain FIFO the model below keeps. */
const ENTRY = { tenant: 'default', classRank: 1, cost: 1, inputTokens: 1 };

function admissionOf(limits: AdmissionLimits): Admission {
  return new Admission(limits, resolveFlowConfig(undefined));
}

/** enter() as 'go', 'queued' or 'full' (the queue_full refusal). */
function enter(admission: Admission, who: Admittable): string {
  const got = admission.enter(who, ENTRY);
  return got instanceof ClientError ? (got.code === 'queue_full' ? 'full' : got.code) : got;
}

describe('Admission', () => {
  for (const seed of [1, 2, 3, 4, 5, 6])
    it(`matches a FIFO model under random enter/leave/cancel (seed ${seed})`, () => {
      const rng = new Rng(seed);
      const random = () => rng.next();
      const max = 1 + Math.floor(random() * 4);
      const queueSize = Math.floor(random() * 5);
      const admission = admissionOf({ maxInFlight: max, queueSize, queueTimeoutMs: 60_000 });
      // The model: who holds a slot, who waits (in order), who was refused.
      const holding: Waiter[] = [];
      const waiting: Waiter[] = [];
      let next = 0;
      for (let op = 0; op < 2000; op++) {
        const r = random();
        if (r < 0.5) {
          const w = new Waiter(next++);
          const got = enter(admission, w);
          if (holding.length < max) {
            expect(got).toBe('go');
            holding.push(w);
          } else if (waiting.length < queueSize) {
            expect(got).toBe('queued');
            waiting.push(w);
          } else expect(got).toBe('full');
        } else if (r < 0.85 && holding.length > 0) {
          holding.splice(Math.floor(random() * holding.length), 1);
          const head = waiting.shift();
          admission.leave(ENTRY.tenant, ENTRY.inputTokens);
          if (head !== undefined) {
            expect(head.admitted).toBe(1); // the longest waiter, at once
            holding.push(head);
          }
        } else if (waiting.length > 0) {
          const [gone] = waiting.splice(Math.floor(random() * waiting.length), 1);
          admission.cancel(gone!);
        }
        expect(admission.flow.active).toBe(holding.length);
        expect(admission.queued).toBe(waiting.length);
        expect(admission.flow.active).toBeLessThanOrEqual(max);
        if (admission.flow.active < max) expect(admission.queued).toBe(0);
      }
      for (const w of waiting) expect(w.admitted).toBe(0);
      admission.close(new ClientError(503, 'closing', 'no_healthy_backend')); // clears the timers
      for (const w of waiting) expect(w.expired?.status).toBe(503);
    });

  it('drains a long queue of requests that finish at once without recursing', () => {
    const admission = admissionOf({ maxInFlight: 1, queueSize: 100_000, queueTimeoutMs: 60_000 });
    const order: number[] = [];
    // Each admitted waiter finishes inside admit() (no healthy backend: an immediate 503).
    const waiters = Array.from(
      { length: 20_000 },
      (_, i) =>
        new Waiter(i, (w) => {
          order.push(w.id);
          admission.leave(ENTRY.tenant, ENTRY.inputTokens);
        }),
    );
    expect(enter(admission, new Waiter(-1))).toBe('go');
    for (const w of waiters) expect(enter(admission, w)).toBe('queued');
    admission.leave(ENTRY.tenant, ENTRY.inputTokens);
    expect(order).toEqual(waiters.map((w) => w.id));
    expect(admission.flow.active).toBe(0);
    expect(admission.queued).toBe(0);
  });

  it('refuses a waiter whose wait runs out, with 429 queue_timeout', async () => {
    const admission = admissionOf({ maxInFlight: 1, queueSize: 1, queueTimeoutMs: 20 });
    expect(enter(admission, new Waiter(0))).toBe('go');
    const late = new Waiter(1);
    expect(enter(admission, late)).toBe('queued');
    await waitFor("the queued waiter's 20 ms to run out", () => late.expired !== undefined);
    expect(late.expired).toMatchObject({ status: 429, code: 'queue_timeout' });
    expect(admission.refused).toEqual({ queue_full: 0, queue_timeout: 1, rate_limited: 0, shed: 0 });
    admission.leave(ENTRY.tenant, ENTRY.inputTokens); // no waiter left: the slot is just freed
    expect(admission.flow.active).toBe(0);
  });

  it('answers the request a full queue drops to make room with 429 queue_full, and queues the newcomer', () => {
    const admission = admissionOf({ maxInFlight: 1, queueSize: 2, queueTimeoutMs: 60_000 });
    const noisy = { ...ENTRY, tenant: 'noisy' };
    expect(admission.enter(new Waiter(0), noisy)).toBe('go');
    const [first, second] = [new Waiter(1), new Waiter(2)];
    expect(admission.enter(first, noisy)).toBe('queued');
    expect(admission.enter(second, noisy)).toBe('queued');
    const quiet = new Waiter(3);
    expect(admission.enter(quiet, { ...ENTRY, tenant: 'quiet' })).toBe('queued');
    expect(second.expired).toMatchObject({ status: 429, code: 'queue_full' });
    expect(first.expired).toBeUndefined();
    expect(admission.refused.queue_full).toBe(1);
    expect(admission.queued).toBe(2);
    admission.leave('noisy', ENTRY.inputTokens);
    admission.leave('noisy', ENTRY.inputTokens);
    expect(quiet.admitted + first.admitted).toBe(2);
    expect(second.admitted).toBe(0);
  });

  it('costs nothing without a limit', () => {
    const admission = admissionOf({ maxInFlight: 0, queueSize: 0, queueTimeoutMs: 1 });
    for (let i = 0; i < 10; i++) expect(enter(admission, new Waiter(i))).toBe('go');
    admission.leave(ENTRY.tenant, ENTRY.inputTokens);
    expect(admission.flow.active).toBe(0);
    expect(admission.limited).toBe(false);
  });
});

describe('the proxy with --max-in-flight', () => {
  it('forwards at most N at once, queues the rest in order, refuses past the queue', async () => {
    const held: ServerResponse[] = [];
    const upstream = await startStub((_req, res) => void held.push(res));
    const metrics = createProxyMetrics({ defaultMetrics: false });
    const rig = await startProxy({
      backends: [upstream.url],
      maxInFlight: 2,
      queueSize: 2,
      queueTimeoutMs: 10_000,
      observers: [metrics.observer],
      mounts: [metrics.mount],
    });
    const answer = () => held.shift()!.writeHead(200, { 'content-type': 'application/json' }).end('{"choices":[]}');
    try {
      const send = (n: number) =>
        post(rig.base, '/v1/chat/completions', {
          model: MODEL,
          messages: [{ role: 'user', content: `request ${n}` }],
        });
      const first = [send(0), send(1)];
      await waitFor('two requests held upstream', () => held.length === 2);
      const queued = [send(2), send(3)];
      await waitFor('two requests queued', () => rig.proxy.state.admission.queued === 2);
      const refused = await send(4);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await refused.json()).toMatchObject({ error: { type: 'server_error', code: 'queue_full' } });
      expect(upstream.requests).toHaveLength(2); // nothing past the limit reached the engine
      const scraped = await (await fetch(`${rig.base}/metrics`)).text();
      expect(scraped).toContain('\nkvroute_queue_depth 2\n');
      expect(scraped).toContain('\nkvroute_admission_refused_total{reason="queue_full"} 1\n');

      answer(); // a slot frees: the longest waiter (request 2) goes
      await waitFor('the upstream to see 3 requests', () => upstream.requests.length === 3);
      expect(upstream.requests[2]!.body.toString()).toContain('request 2');
      answer();
      await waitFor('the upstream to see 4 requests', () => upstream.requests.length === 4);
      expect(upstream.requests[3]!.body.toString()).toContain('request 3');
      while (held.length > 0) answer();
      for (const response of [...(await Promise.all(first)), ...(await Promise.all(queued))])
        expect(response.status).toBe(200);
      expect(rig.proxy.state.admission.flow.active).toBe(0);
    } finally {
      while (held.length > 0) answer();
      await rig.close();
      await upstream.close();
    }
  });

  it('refuses a request that waited too long; one whose client left is never sent', async () => {
    const held: ServerResponse[] = [];
    const upstream = await startStub((_req, res) => void held.push(res));
    const rig = await startProxy({ backends: [upstream.url], maxInFlight: 1, queueSize: 4, queueTimeoutMs: 150 });
    const body = { model: MODEL, messages: [{ role: 'user', content: 'hi' }] };
    try {
      const first = post(rig.base, '/v1/chat/completions', body);
      await waitFor('one request held upstream', () => held.length === 1);
      const controller = new AbortController();
      const leaving = post(rig.base, '/v1/chat/completions', body, {}, controller.signal).catch((e: Error) => e);
      await waitFor('one request queued', () => rig.proxy.state.admission.queued === 1);
      controller.abort();
      await leaving;
      await waitFor('the queue to empty', () => rig.proxy.state.admission.queued === 0);
      const started = Date.now();
      const timedOut = await post(rig.base, '/v1/chat/completions', body);
      expect(timedOut.status).toBe(429);
      expect(Date.now() - started).toBeGreaterThanOrEqual(140);
      expect(await timedOut.json()).toMatchObject({ error: { code: 'queue_timeout' } });
      held.shift()!.writeHead(200, { 'content-type': 'application/json' }).end('{"choices":[]}');
      expect((await first).status).toBe(200);
      expect(upstream.requests).toHaveLength(1); // the aborted and the timed-out never reached it
      expect(rig.proxy.state.admission.flow.active).toBe(0);
    } finally {
      for (const res of held) res.end();
      await rig.close();
      await upstream.close();
    }
  });

  it('gives the slot back on every ending: a retry keeps one slot, a failed request frees it', async () => {
    const dead = await refusingUrl();
    const held: ServerResponse[] = [];
    const upstream = await startStub((_req, res) => void held.push(res));
    const rig = await startProxy({ backends: [dead, upstream.url], maxInFlight: 1, queueSize: 8, retries: 1 });
    const body = (n: number) => ({ model: MODEL, messages: [{ role: 'user', content: `retry ${n}` }] });
    try {
      // Whichever backend the first request tries first, it ends on the live one holding one slot.
      const first = post(rig.base, '/v1/chat/completions', body(0));
      await waitFor('one request held upstream', () => held.length === 1);
      expect(rig.proxy.state.admission.flow.active).toBe(1);
      const second = post(rig.base, '/v1/chat/completions', body(1));
      await waitFor('one request queued', () => rig.proxy.state.admission.queued === 1);
      held.shift()!.writeHead(200, { 'content-type': 'application/json' }).end('{"choices":[]}');
      expect((await first).status).toBe(200);
      await waitFor('the second request to get the slot', () => held.length === 1);
      upstream.requests.length = 0;
      // With the live backend drained, requests fail at once (503, or 502 after trying the dead
      // one if no request tripped it yet) and each frees its slot for the next.
      rig.proxy.state.drainBackend(upstream.url);
      held.shift()!.writeHead(200, { 'content-type': 'application/json' }).end('{"choices":[]}');
      expect((await second).status).toBe(200);
      const failed = await Promise.all([0, 1, 2].map((n) => post(rig.base, '/v1/chat/completions', body(n))));
      for (const r of failed) expect([502, 503]).toContain(r.status);
      expect(rig.proxy.state.admission.flow.active).toBe(0);
      expect(rig.proxy.state.admission.queued).toBe(0);
    } finally {
      for (const res of held) res.end();
      await rig.close();
      await upstream.close();
    }
  });

  it('takes its limits from flags, naming a bad one', () => {
    const config = resolveServeConfig({ 'max-in-flight': '64', 'queue-size': '0', 'queue-timeout': '5000' }, {});
    expect(config.proxy).toMatchObject({ maxInFlight: 64, queueSize: 0, queueTimeoutMs: 5000 });
    expect(() => resolveServeConfig({ 'max-in-flight': '-1' }, {})).toThrow(ConfigError);
    expect(() => resolveServeConfig({}, { KVROUTE_QUEUE_TIMEOUT: '0' })).toThrow(/KVROUTE_QUEUE_TIMEOUT/);
  });
});
