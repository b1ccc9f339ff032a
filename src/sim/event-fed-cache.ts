/**
 * `cacheState: 'events'` (docs/scale-out.md): every router replica's cache state fed from every
 * engine's KV events, as each `kvroute serve` replica subscribing to the engines' ZMQ feeds
 * would be, instead of each replica's belief from its own dispatches.
 *
 * Each engine's block pool reports to an EngineKvEvents (the same listener that makes `sim serve`
 * publish vLLM's events) that flushes on demand. Before a replica routes, every engine's pending
 * events go, in the engine's order, to every replica through applyKvEvents (src/events/direct-kv-events.ts) as vLLM's unpacked
 * map-encoded events: the same checks and index the proxy's feeds use. Requests route by their
 * derived tokens (derived-tokens.ts), the tokens the engines' BlockStored events carry, so their
 * keys meet the events' keys.
 *
 * Without a delay (`cacheState: 'events'`, idealised): an event reaches every replica before the
 * next route after the step that caused it (vLLM emits at scheduling), none is lost, and no
 * replica joins late. With `delayS` > 0 (`--sync events|all --sync-delay MS`, the relay and the
 * bus between them, docs/scale-out.md): each simulator event's emitted KV events are stamped with
 * its virtual time (capture), and reach every replica `delayS` later, still in order and none lost.
 */
import type { Router } from '../core/router.js';
import { applyKvEvents } from '../events/direct-kv-events.js';
import type { TraceRequest } from '../trace/types.js';
import { derivedPromptTokens } from './derived-tokens.js';
import { EngineKvEvents } from './engine-kv-events.js';
import type { EngineModel } from './engine-model.js';
import { wireEvent, type PublishedKvEvent } from './kv-event-encoding.js';

export type CacheState = 'own' | 'events';
export const CACHE_STATES: readonly CacheState[] = ['own', 'events'];

/** One engine's events of one simulator event, waiting out the sync delay. */
interface DelayedEvents {
  at: number;
  instance: number;
  events: unknown[];
}

export class EventFedCache {
  private readonly feeds: EngineKvEvents[];
  /** Captured events not yet due, in capture order (so in time order); from `head` on. */
  private delayed: DelayedEvents[] = [];
  private head = 0;
  private captureAt = 0;

  constructor(
    engines: readonly EngineModel[],
    private readonly routers: readonly Router[],
    private readonly instanceIds: readonly string[],
    private readonly blockSize: number,
    /** Virtual seconds from an engine's event to its arrival at the replicas; 0: none. */
    private readonly delayS = 0,
  ) {
    this.feeds = engines.map((engine, instance) => {
      const feed = new EngineKvEvents(blockSize, (events) => this.deliver(instance, events), 'demand');
      engine.pool.listener = feed;
      return feed;
    });
    // Fed from the start: an empty index is the truth about an engine that has cached nothing.
    for (const router of routers) for (const id of instanceIds) applyKvEvents(router, id, []);
  }

  /**
   * Before a replica routes at virtual second `now`: hands every replica the engines' events that
   * are due (without a delay, every event so far).
   */
  sync(now: number): void {
    if (this.delayS === 0) {
      for (const feed of this.feeds) feed.flushNow();
      return;
    }
    this.capture(now);
    let at = this.head;
    for (; at < this.delayed.length && this.delayed[at]!.at + this.delayS <= now; at += 1) {
      const { instance, events } = this.delayed[at]!;
      const id = this.instanceIds[instance]!;
      for (const router of this.routers) applyKvEvents(router, id, events);
    }
    this.head = at;
    if (this.head > 4096 && this.head * 2 > this.delayed.length) {
      this.delayed = this.delayed.slice(this.head);
      this.head = 0;
    }
  }

  /** With a delay: stamps the events the engines emitted since the last capture with `now`. */
  capture(now: number): void {
    if (this.delayS === 0) return;
    this.captureAt = now;
    for (const feed of this.feeds) feed.flushNow();
  }

  /** The request's prompt as token ids: the route() input whose keys the events' keys meet. */
  tokensOf(request: TraceRequest): Uint32Array {
    return derivedPromptTokens(request.hashIds, this.blockSize, request.inputLength);
  }

  private deliver(instance: number, events: PublishedKvEvent[]): void {
    const unpacked = events.map((event) => wireEvent(event, 'map'));
    if (this.delayS > 0) {
      this.delayed.push({ at: this.captureAt, instance, events: unpacked });
      return;
    }
    const id = this.instanceIds[instance]!;
    for (const router of this.routers) applyKvEvents(router, id, unpacked);
  }
}
