/**
 * The main thread's side of flow control under `kvroute serve --threads N` (docs/flow-control.md
 * "Threads"): its Admission owns the process's one queue and the shared slot count
 * (SharedSlots), and this hub answers the other threads (thread-admission.ts):
 * - `flow-enter`: a request the thread let in past shedding and its rate limits takes a slot or
 *   waits in the one queue, as the main thread's own would; the answer, now or when its turn or
 *   deadline comes, is `flow-admit` or `flow-refuse`;
 * - `flow-leave`: a request admitted here gave its slot back (the next waiter is admitted);
 * - `flow-cancel`: a waiting request's client went away;
 * - `flow-held`: slots the thread took and gave back on its own, so the tenants' shares stay
 *   right, and `kick` when one came back while requests waited.
 * A thread that exits gives back every slot it held and its waiters leave the queue, so a crashed
 * thread never shrinks the process's `--max-in-flight`.
 */
import type { FlowEntry } from '../../flow/flow-controller.js';
import type { SharedSlots } from '../../flow/slot-counter.js';
import type { Admission, Admittable } from '../exchange/admission.js';
import type { ClientError } from '../server/error-body.js';
import type { FlowToPrimary, FlowToThread } from './thread-messages.js';

/** A waiting request of another thread, as the main thread's queue holds it. */
class RemoteWaiter implements Admittable {
  constructor(
    private readonly hub: FlowHub,
    readonly thread: number,
    readonly id: number,
    readonly entry: FlowEntry,
  ) {}

  admit(): void {
    this.hub.admitted(this);
  }

  expire(error: ClientError): void {
    this.hub.refused(this, error);
  }
}

export class FlowHub {
  /** Waiting requests by thread, by id. */
  private readonly waiting = new Map<number, Map<number, RemoteWaiter>>();
  /**
   * What each thread holds by tenant as the shares count it: admitted here and not yet given
   * back, plus what it reported taking on its own (net). The slots it took on its own are also
   * in the shared count's cell of its own (SharedSlots.releaseAllOf), reported or not.
   */
  private readonly holding = new Map<number, Map<string, { slots: number; tokens: number }>>();
  /** Slots admitted here to each thread and not yet given back. */
  private readonly admittedTo = new Map<number, number>();

  constructor(
    private readonly admission: Admission,
    private readonly slots: SharedSlots,
    private readonly post: (thread: number, message: FlowToThread) => void,
  ) {}

  heard(thread: number, message: FlowToPrimary): void {
    const now = performance.now();
    switch (message.type) {
      case 'flow-enter': {
        const who = new RemoteWaiter(this, thread, message.id, message.entry);
        this.waitersOf(thread).set(message.id, who);
        const result = this.admission.enterChecked(who, message.entry);
        if (result === 'go') who.admit();
        else if (result !== 'queued') who.expire(result);
        break;
      }
      case 'flow-leave':
        this.hold(thread, message.tenant, -1, -message.inputTokens);
        this.admittedTo.set(thread, (this.admittedTo.get(thread) ?? 1) - 1);
        this.admission.leave(message.tenant, message.inputTokens);
        break;
      case 'flow-cancel': {
        const who = this.waiting.get(thread)?.get(message.id);
        if (who === undefined) break;
        this.waiting.get(thread)!.delete(message.id);
        this.admission.cancel(who);
        break;
      }
      case 'flow-held':
        for (const [tenant, slots, tokens] of message.deltas) {
          this.hold(thread, tenant, slots, tokens);
          this.admission.flow.heldElsewhere(tenant, slots, tokens, now);
        }
        if (message.kick) this.admission.drain();
        break;
    }
  }

  /** The thread exited: its slots come back and its waiters leave the queue. */
  threadGone(thread: number): void {
    for (const who of this.waiting.get(thread)?.values() ?? []) this.admission.cancel(who);
    this.waiting.delete(thread);
    this.slots.releaseAllOf(thread);
    for (let k = this.admittedTo.get(thread) ?? 0; k > 0; k--) this.slots.release();
    this.admittedTo.delete(thread);
    const now = performance.now();
    for (const [tenant, { slots, tokens }] of this.holding.get(thread) ?? [])
      this.admission.flow.heldElsewhere(tenant, -slots, -tokens, now);
    this.holding.delete(thread);
    this.admission.drain();
  }

  /** RemoteWaiter: its turn came (at once, or when a slot was given back). */
  admitted(who: RemoteWaiter): void {
    this.waiting.get(who.thread)?.delete(who.id);
    this.admittedTo.set(who.thread, (this.admittedTo.get(who.thread) ?? 0) + 1);
    this.hold(who.thread, who.entry.tenant, 1, who.entry.inputTokens);
    this.post(who.thread, {
      type: 'flow-admit',
      id: who.id,
      tenant: who.entry.tenant,
      inputTokens: who.entry.inputTokens,
    });
  }

  /** RemoteWaiter: refused (the queue was full, its deadline passed, or the proxy is closing). */
  refused(who: RemoteWaiter, error: ClientError): void {
    this.waiting.get(who.thread)?.delete(who.id);
    this.post(who.thread, {
      type: 'flow-refuse',
      id: who.id,
      status: error.status,
      message: error.message,
      code: error.code,
      retryAfterSeconds: error.retryAfterSeconds,
    });
  }

  private waitersOf(thread: number): Map<number, RemoteWaiter> {
    let map = this.waiting.get(thread);
    if (map === undefined) this.waiting.set(thread, (map = new Map()));
    return map;
  }

  private hold(thread: number, tenant: string, slots: number, tokens: number): void {
    let byTenant = this.holding.get(thread);
    if (byTenant === undefined) this.holding.set(thread, (byTenant = new Map()));
    const held = byTenant.get(tenant) ?? { slots: 0, tokens: 0 };
    held.slots += slots;
    held.tokens += tokens;
    if (held.slots === 0 && held.tokens === 0) byTenant.delete(tenant);
    else byTenant.set(tenant, held);
  }
}
