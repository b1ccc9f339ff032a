/**
 * Who holds flow control's slots, by tenant, for the headroom rule (flow-controller.ts): the last
 * few free slots go only to a tenant holding no more than its share.
 *
 * Holdings are counted in prompt tokens, not slots, as fair queueing charges cost rather than
 * requests: a tenant of short prompts that holds many slots has not had more than one of long
 * prompts holding few. A tenant's share is `slots` slots' worth of prompt tokens (the tokens
 * holding slots now, per slot held, × slots) × its weight ÷ the weight of every *active* tenant,
 * itself counted: with requests all alike, simply slots × weight ÷ active weight. A tenant is active while it
 * holds a slot, and for ACTIVE_WINDOW_MS after it last took or gave one back: a quiet tenant
 * between two requests, or an agent in a tool call, still counts, so a flood cannot take back
 * the quiet tenant's share the moment its last request ends. A tenant alone holds exactly its
 * share, so it is never over it.
 *
 * Invariants: `held` has an entry exactly for the tenants holding a slot (slots and tokens);
 * `heldTokens` is the sum of their tokens; `active` holds every
 * active tenant with the weight counted for it, and `activeWeight` is their sum. Exactly: a
 * tenant is active at `now` when it holds a slot or `now - lastAt < ACTIVE_WINDOW_MS`. Expiry is
 * lazy: every active tenant has one entry in a heap by time, never later than its lastAt unless
 * it holds a slot; when the entry comes of age the tenant leaves `active`, or is filed again (at
 * lastAt, or at now while it holds a slot). O(log n) per call over the n active tenants; memory
 * follows the tenants active within the window, not the requests.
 */
import { MinHeap } from '../core/min-heap.js';

export const ACTIVE_WINDOW_MS = 10_000;

interface Filed {
  tenant: string;
  at: number;
}

export class SlotShares {
  private readonly held = new Map<string, { slots: number; tokens: number }>();
  private heldTokens = 0;
  /** Active tenants: the weight counted for each, and when it last took or gave back a slot. */
  private readonly active = new Map<string, { weight: number; lastAt: number }>();
  private activeWeight = 0;
  private readonly filed = new MinHeap<Filed>((a, b) => a.at < b.at);

  /** `weight(tenant)` is read when a tenant becomes active, and again by reweigh(). */
  constructor(private readonly weight: (tenant: string) => number) {}

  /** A request of `tokens` prompt tokens of the tenant took a slot. */
  take(tenant: string, tokens: number, now: number): void {
    this.adjust(tenant, 1, tokens, now);
  }

  /** A request of `tokens` prompt tokens of the tenant gave its slot back (the tokens it took with). */
  giveBack(tenant: string, tokens: number, now: number): void {
    this.adjust(tenant, -1, -tokens, now);
  }

  /**
   * The tenant's holding changes by `slots` slots of `tokens` prompt tokens (negative: given
   * back): one request's, or a thread's batch of them (thread-admission.ts).
   */
  adjust(tenant: string, slots: number, tokens: number, now: number): void {
    const holding = this.held.get(tenant);
    const was = holding?.tokens ?? 0;
    if (holding === undefined) {
      if (slots > 0) this.held.set(tenant, { slots, tokens });
    } else {
      holding.slots += slots;
      holding.tokens += tokens;
      if (holding.slots <= 0) this.held.delete(tenant);
    }
    this.heldTokens += (this.held.get(tenant)?.tokens ?? 0) - was;
    if (this.held.size === 0) this.heldTokens = 0;
    this.touch(tenant, now);
  }

  /**
   * The tenant holds more than its share of `slots` slots, `holding` of them held now (so the
   * headroom is not for it). Compared as products, which are exact for integer tokens and the
   * weights people write.
   */
  overShare(tenant: string, slots: number, holding: number, now: number): boolean {
    this.expire(now);
    const weight = this.weight(tenant);
    const counted = this.active.get(tenant);
    const total = counted === undefined ? this.activeWeight + weight : this.activeWeight - counted.weight + weight;
    const mine = this.held.get(tenant)?.tokens ?? 0;
    return mine * holding * total > this.heldTokens * slots * weight;
  }

  /** Weights changed (a live config change): every active tenant is counted at its new weight. */
  reweigh(): void {
    this.activeWeight = 0;
    for (const [tenant, entry] of this.active) {
      entry.weight = this.weight(tenant);
      this.activeWeight += entry.weight;
    }
  }

  private touch(tenant: string, now: number): void {
    const entry = this.active.get(tenant);
    if (entry === undefined) {
      const weight = this.weight(tenant);
      this.active.set(tenant, { weight, lastAt: now });
      this.activeWeight += weight;
      this.filed.push({ tenant, at: now });
    } else entry.lastAt = now;
    this.expire(now);
  }

  private expire(now: number): void {
    for (let top = this.filed.peek(); top !== undefined && top.at <= now - ACTIVE_WINDOW_MS; top = this.filed.peek()) {
      this.filed.pop();
      const entry = this.active.get(top.tenant)!;
      // Holding a slot, or seen since: still active, filed again inside the window (so this loop ends).
      if (this.held.has(top.tenant)) this.filed.push({ tenant: top.tenant, at: now });
      else if (entry.lastAt > now - ACTIVE_WINDOW_MS) this.filed.push({ tenant: top.tenant, at: entry.lastAt });
      else {
        this.active.delete(top.tenant);
        this.activeWeight -= entry.weight;
      }
    }
    if (this.active.size === 0) this.activeWeight = 0; // no drift from float sums
  }
}
