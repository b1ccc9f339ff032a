/**
 * Flow control in a thread of `kvroute serve --threads N` (docs/flow-control.md "Threads"): the
 * process has one `--max-in-flight` and one queue, the main thread's (flow-hub.ts); this thread
 * keeps only what is cheap to keep apart, its 1/N of every rate limit and the shedding check.
 *
 * A request that passes those takes a slot:
 * - **on its own** (no message): while nobody waits in the main queue and more than the headroom
 *   is free, it takes one of the shared count's slots (SharedSlots.tryTake) — the common case,
 *   and the only one without a round trip. Its tenant's holding is told to the main thread in a
 *   batch (`flow-held`, at most every HELD_FLUSH_MS), so shares stay right for the headroom;
 * - **from the main thread** otherwise (`flow-enter`): it waits ('queued') for `flow-admit` or
 *   `flow-refuse`, in the one queue's order, fair share and deadlines.
 * It gives the slot back the way it took it: to the count (and `kick`s the main thread if
 * requests wait), or with `flow-leave`. A client that leaves while waiting sends `flow-cancel`;
 * if the main thread admitted it meanwhile, the slot goes straight back (`flow-leave`).
 */
import type { FlowConfig } from '../../flow/flow-config.js';
import type { FlowEntry } from '../../flow/flow-controller.js';
import type { SharedSlots } from '../../flow/slot-counter.js';
import type { Router } from '../../core/router.js';
import { Admission, type AdmissionLimits, type Admittable } from '../exchange/admission.js';
import { ClientError, type ProxyErrorCode } from '../server/error-body.js';
import type { FlowToPrimary, FlowToThread } from './thread-messages.js';

const HELD_FLUSH_MS = 5;

export class ThreadAdmission extends Admission {
  private readonly pending = new Map<number, Admittable>();
  private readonly ids = new Map<Admittable, number>();
  /** Holders that took their slot on their own (they give it back to the count). */
  private readonly ownSlots = new WeakSet<Admittable>();
  private nextId = 1;
  /** Net holdings by tenant since the last flush: [slots, tokens]. */
  private readonly deltas = new Map<string, [number, number]>();
  private kick = false;
  private flushTimer: NodeJS.Timeout | undefined;

  /** `limits` are the whole process's (the main thread enforces them); `share` scales the rate limits. */
  constructor(
    private readonly processLimits: AdmissionLimits,
    config: FlowConfig,
    share: number,
    router: () => Router,
    private readonly slots: SharedSlots,
    private readonly post: (message: FlowToPrimary) => void,
  ) {
    super({ ...processLimits, maxInFlight: 0 }, config, share, router);
  }

  override get limited(): boolean {
    return this.processLimits.maxInFlight > 0;
  }

  override get queued(): number {
    return this.pending.size;
  }

  override enter(who: Admittable, entry: FlowEntry): 'go' | 'queued' | ClientError {
    const checked = super.enter(who, entry); // shedding and rate limits: no slot here (maxInFlight 0)
    if (checked !== 'go' || !this.limited) return checked;
    const max = this.processLimits.maxInFlight;
    const beyondHeadroom = max - Math.floor(max * this.flow.flowConfig.headroom);
    if (this.slots.waiting === 0 && this.slots.takeOwn(beyondHeadroom)) {
      this.ownSlots.add(who);
      this.held(entry.tenant, 1, entry.inputTokens);
      return 'go';
    }
    const id = this.nextId++;
    this.pending.set(id, who);
    this.ids.set(who, id);
    this.post({
      type: 'flow-enter',
      id,
      entry: {
        tenant: entry.tenant,
        classRank: entry.classRank,
        cost: entry.cost,
        inputTokens: entry.inputTokens,
        ...(entry.continuation === undefined ? {} : { continuation: entry.continuation }),
        ...(entry.deadlineMs === undefined ? {} : { deadlineMs: entry.deadlineMs }),
      },
    });
    return 'queued';
  }

  override leave(tenant: string, inputTokens: number, who?: Admittable): void {
    if (!this.limited) return;
    if (who !== undefined && this.ownSlots.has(who)) {
      this.ownSlots.delete(who);
      this.slots.releaseOwn();
      this.held(tenant, -1, -inputTokens);
      if (this.slots.waiting > 0) {
        // Requests wait in the main queue: tell it now, it admits the next into this slot.
        this.kick = true;
        this.flush();
      }
      return;
    }
    this.post({ type: 'flow-leave', tenant, inputTokens });
  }

  override cancel(who: Admittable): void {
    const id = this.ids.get(who);
    if (id === undefined) return;
    this.forget(id, who);
    this.post({ type: 'flow-cancel', id });
  }

  override close(error: ClientError): void {
    for (const [id, who] of [...this.pending]) {
      this.forget(id, who);
      this.post({ type: 'flow-cancel', id });
      who.expire(error);
    }
    this.flush();
  }

  /** The main thread's answer to a `flow-enter`. */
  heard(message: FlowToThread): void {
    const who = this.pending.get(message.id);
    if (message.type === 'flow-admit') {
      // Cancelled meanwhile: the slot it was given goes straight back.
      if (who === undefined)
        return this.post({ type: 'flow-leave', tenant: message.tenant, inputTokens: message.inputTokens });
      this.forget(message.id, who);
      who.admit();
      return;
    }
    if (who === undefined) return;
    this.forget(message.id, who); // the main thread counted the refusal
    const error = new ClientError(message.status, message.message, message.code as ProxyErrorCode);
    error.retryAfterSeconds = message.retryAfterSeconds;
    who.expire(error);
  }

  /** Sends what is batched now (also on close). */
  flush(): void {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    if (this.deltas.size === 0 && !this.kick) return;
    const deltas: Array<[string, number, number]> = [];
    for (const [tenant, [slots, tokens]] of this.deltas)
      if (slots !== 0 || tokens !== 0) deltas.push([tenant, slots, tokens]);
    this.deltas.clear();
    const kick = this.kick;
    this.kick = false;
    this.post({ type: 'flow-held', deltas, kick });
  }

  private forget(id: number, who: Admittable): void {
    this.pending.delete(id);
    this.ids.delete(who);
  }

  private held(tenant: string, slots: number, tokens: number): void {
    const delta = this.deltas.get(tenant);
    if (delta === undefined) this.deltas.set(tenant, [slots, tokens]);
    else {
      delta[0] += slots;
      delta[1] += tokens;
    }
    if (this.flushTimer === undefined) {
      this.flushTimer = setTimeout(() => this.flush(), HELD_FLUSH_MS);
      this.flushTimer.unref();
    }
  }
}
