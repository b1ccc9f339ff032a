/**
 * Who holds flow control's slots, by tenant, for the headroom rule (flow-controller.ts): the last
 * few free slots go only to a tenant holding no more than its share.
 *
 * A tenant's share is maxInFlight × its weight ÷ the weight of every *active* tenant, itself
 * counted. A tenant is active while it holds a slot, and for ACTIVE_WINDOW_MS after it last took
 * or gave one back: a quiet tenant between two requests, or an agent in a tool call, still
 * counts, so a flood cannot take back the quiet tenant's share the moment its last request ends.
 *
 * Invariants: `held` has an entry exactly for the tenants holding a slot; `active` holds every
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
  private readonly held = new Map<string, number>();
  /** Active tenants: the weight counted for each, and when it last took or gave back a slot. */
  private readonly active = new Map<string, { weight: number; lastAt: number }>();
  private activeWeight = 0;
  private readonly filed = new MinHeap<Filed>((a, b) => a.at < b.at);

  /** `weight(tenant)` is read when a tenant becomes active, and again by reweigh(). */
  constructor(private readonly weight: (tenant: string) => number) {}

  /** Slots the tenant holds now. */
  holding(tenant: string): number {
    return this.held.get(tenant) ?? 0;
  }

  take(tenant: string, now: number): void {
    this.held.set(tenant, this.holding(tenant) + 1);
    this.touch(tenant, now);
  }

  giveBack(tenant: string, now: number): void {
    const holding = this.holding(tenant);
    if (holding <= 1) this.held.delete(tenant);
    else this.held.set(tenant, holding - 1);
    this.touch(tenant, now);
  }

  /** The tenant holds more than its share of `slots` (so the headroom is not for it). */
  overShare(tenant: string, slots: number, now: number): boolean {
    this.expire(now);
    const weight = this.weight(tenant);
    const counted = this.active.get(tenant);
    const total = counted === undefined ? this.activeWeight + weight : this.activeWeight - counted.weight + weight;
    return this.holding(tenant) > (slots * weight) / total;
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
