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
 * Idealised: an event reaches every replica before the next route after the step that caused it
 * (vLLM emits at scheduling; real feeds add milliseconds), none is lost, and no replica joins late.
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

export class EventFedCache {
  private readonly feeds: EngineKvEvents[];

  constructor(
    engines: readonly EngineModel[],
    private readonly routers: readonly Router[],
    private readonly instanceIds: readonly string[],
    private readonly blockSize: number,
  ) {
    this.feeds = engines.map((engine, instance) => {
      const feed = new EngineKvEvents(blockSize, (events) => this.deliver(instance, events), 'demand');
      engine.pool.listener = feed;
      return feed;
    });
    // Fed from the start: an empty index is the truth about an engine that has cached nothing.
    for (const router of routers) for (const id of instanceIds) applyKvEvents(router, id, []);
  }

  /** Hands every engine's events so far to every replica. Call before a replica routes. */
  sync(): void {
    for (const feed of this.feeds) feed.flushNow();
  }

  /** The request's prompt as token ids: the route() input whose keys the events' keys meet. */
  tokensOf(request: TraceRequest): Uint32Array {
    return derivedPromptTokens(request.hashIds, this.blockSize, request.inputLength);
  }

  private deliver(instance: number, events: PublishedKvEvent[]): void {
    const unpacked = events.map((event) => wireEvent(event, 'map'));
    const id = this.instanceIds[instance]!;
    for (const router of this.routers) applyKvEvents(router, id, unpacked);
  }
}
