/**
 * The main thread's side of one queue under `serve --threads N` (src/proxy/threads/flow-hub.ts,
 * thread-admission.ts), without workers: two ThreadAdmissions and the main thread's Admission
 * share one SharedSlots, their messages carried by hand. The process holds `--max-in-flight`
 * whichever thread takes a slot; a thread's waiter is admitted when any thread gives a slot
 * back; a cancel that crosses an admit gives the slot back; a thread that exits gives back all
 * it held.
 */
import { describe, expect, it } from 'vitest';

import { Router } from '../src/core/router.js';
import { resolveFlowConfig } from '../src/flow/flow-config.js';
import { SharedSlots } from '../src/flow/slot-counter.js';
import { Admission, type Admittable } from '../src/proxy/exchange/admission.js';
import { ClientError } from '../src/proxy/server/error-body.js';
import { FlowHub } from '../src/proxy/threads/flow-hub.js';
import { ThreadAdmission } from '../src/proxy/threads/thread-admission.js';
import type { FlowToPrimary, FlowToThread } from '../src/proxy/threads/thread-messages.js';

class Waiter implements Admittable {
  admitted = 0;
  expired: ClientError | undefined;
  admit(): void {
    this.admitted++;
  }
  expire(error: ClientError): void {
    this.expired = error;
  }
}

const entry = (tenant: string) => ({ tenant, classRank: 1, cost: 100, inputTokens: 100 });

function process(maxInFlight: number) {
  const buffer = new SharedArrayBuffer(SharedSlots.bytesFor(3));
  const slots = new SharedSlots(buffer);
  const limits = { maxInFlight, queueSize: 100, queueTimeoutMs: 60_000 };
  const config = resolveFlowConfig({ headroom: 0 });
  const router = new Router({ instances: ['a'] });
  const main = new Admission(limits, config, 1 / 3, () => router, slots);
  const toMain: Array<[number, FlowToPrimary]> = [];
  const threads = [1, 2].map(
    (k) =>
      new ThreadAdmission(
        limits,
        config,
        1 / 3,
        () => router,
        new SharedSlots(buffer, k),
        (m) => toMain.push([k, m]),
      ),
  );
  const hub = new FlowHub(main, slots, (thread, message: FlowToThread) => threads[thread - 1]!.heard(message));
  /** Carries every message the threads sent to the main thread, in order. */
  const deliver = (): void => {
    while (toMain.length > 0) {
      const [thread, message] = toMain.shift()!;
      hub.heard(thread, message);
    }
  };
  return { slots, main, threads, hub, deliver };
}

describe('one queue for the threads of a process (FlowHub, ThreadAdmission)', () => {
  it('holds the process to --max-in-flight and admits a thread’s waiter when another thread gives a slot back', () => {
    const p = process(2);
    const [t1, t2] = p.threads as [ThreadAdmission, ThreadAdmission];
    const a = new Waiter();
    const b = new Waiter();
    const c = new Waiter();
    expect(t1.enter(a, entry('x'))).toBe('go'); // on its own: nobody waits, a slot is free
    expect(p.main.enter(b, entry('y'))).toBe('go');
    expect(t2.enter(c, entry('z'))).toBe('queued'); // full: it asks the main thread
    p.deliver();
    expect(p.slots.value).toBe(2);
    expect(p.main.queued).toBe(1);
    expect(p.slots.waiting).toBe(1);
    t1.leave('x', 100, a); // a slot back on thread 1, with requests waiting: it kicks the main thread
    p.deliver();
    expect(c.admitted).toBe(1);
    expect(p.slots.value).toBe(2);
    expect(p.slots.waiting).toBe(0);
    t2.leave('z', 100, c); // admitted by the main thread: given back there
    p.deliver();
    p.main.leave('y', 100, b);
    expect(p.slots.value).toBe(0);
  });

  it('gives the slot straight back when a cancel crosses the admit', () => {
    const p = process(1);
    const [t1] = p.threads as [ThreadAdmission, ThreadAdmission];
    const holder = new Waiter();
    const late = new Waiter();
    expect(p.main.enter(holder, entry('x'))).toBe('go');
    expect(t1.enter(late, entry('y'))).toBe('queued');
    p.deliver();
    p.main.leave('x', 100, holder); // the main thread admits `late`: flow-admit is on its way
    expect(p.slots.value).toBe(1);
    t1.cancel(late); // the client left before the admit arrived… (here it has arrived: admitted once)
    p.deliver();
    expect(late.admitted).toBe(1);
    const gone = new Waiter();
    expect(t1.enter(gone, entry('y'))).toBe('queued');
    t1.cancel(gone); // cancelled before the main thread heard of it
    p.deliver();
    expect(gone.admitted).toBe(0);
    expect(p.main.queued).toBe(0);
  });

  it('takes back every slot of a thread that exits, and drops its waiters', () => {
    const p = process(3);
    const [t1, t2] = p.threads as [ThreadAdmission, ThreadAdmission];
    for (let k = 0; k < 2; k++) expect(t1.enter(new Waiter(), entry('x'))).toBe('go');
    t1.flush(); // its holdings, batched
    expect(t1.enter(new Waiter(), entry('x'))).toBe('go');
    const waiting = new Waiter();
    expect(t1.enter(waiting, entry('x'))).toBe('queued');
    p.deliver();
    expect(p.slots.value).toBe(3);
    p.hub.threadGone(1);
    expect(p.slots.value).toBe(0);
    expect(p.main.queued).toBe(0);
    const next = new Waiter();
    expect(t2.enter(next, entry('y'))).toBe('go');
  });

  it('answers a thread’s waiter past its deadline with the queue’s own refusal', async () => {
    const p = process(1);
    const [t1] = p.threads as [ThreadAdmission, ThreadAdmission];
    expect(p.main.enter(new Waiter(), entry('x'))).toBe('go');
    const late = new Waiter();
    expect(t1.enter(late, { ...entry('y'), deadlineMs: 20 })).toBe('queued');
    p.deliver();
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(late.expired).toMatchObject({ status: 429, code: 'queue_timeout' });
    expect(late.expired!.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(p.main.refused.queue_timeout).toBe(1);
    p.main.close(new ClientError(503, 'closing', 'no_healthy_backend'));
  });
});
