/**
 * subscribeKvEvents: one router instance fed by its engine's ZeroMQ KV events (docs/kv-events.md).
 * The router's core owns the event-fed index and never the transport; this subscription owns the
 * KvEventFeed (SUB socket, replay client, sequence checks) and writes through the instance's
 * KvEventSink (src/core/kv-event-sink.ts) as its only writer.
 *
 * Invariants:
 * - an instance has at most one subscription (the sink refuses a second owner); removing the
 *   instance, or router.close(), closes it, and a closed feed never touches the core again
 *   (KvEventFeed drops what arrives after close, and a closed sink ignores calls);
 * - a turn's messages reach the core in one batched apply per event-loop turn (the feed
 *   coalesces; the packer reuses its buffers);
 * - a message the packer refuses (e.g. a token id past 32 bits) is counted as malformed and
 *   skipped alone: the packer rolls it back, the turn's other messages are applied;
 * - failures to start are warned through the router's onWarning, never thrown: the instance routes
 *   on its belief index meanwhile.
 */
import { describe, rangeError } from '../core/errors.js';
import type { KvEventSink, KvEventSinkOwner } from '../core/kv-event-sink.js';
import type { Router } from '../core/router.js';
import type { KvEventInstanceStats } from '../core/types.js';
import { KvEventFormatError, type KvEventMessage } from './kv-event-batch.js';
import { KvEventFeed } from './kv-event-feed.js';
import { KvEventPacker } from './packed-kv-events.js';
import { parseZmqEndpoint, ZMQ_ENDPOINT_EXPECTED } from './zmq-endpoint.js';

/** Where an instance's engine publishes its KV events. */
export interface KvEventEndpoints {
  /**
   * The engine's KV cache event endpoint (vLLM's `--kv-events-config` endpoint, e.g.
   * tcp://10.0.0.5:5557): the instance's token-keyed requests are then matched against what the
   * engine reports it holds. While not connected the instance routes on its belief index.
   */
  endpoint: string;
  /** The engine's KV event replay endpoint, asked for the messages a gap lost. */
  replay?: string | undefined;
}

/** A running subscription; router.removeInstance() and router.close() close it too. */
export interface KvEventSubscription {
  close(): Promise<void>;
}

/**
 * Subscribes `instance` of `router` to its engine's KV events: starts at once, returns at once.
 * Throws ERR_KVROUTE_INVALID_ARG_VALUE for a malformed endpoint, ERR_KVROUTE_UNKNOWN_INSTANCE for
 * an unknown instance, ERR_KVROUTE_KV_EVENT when the instance already has a subscription.
 */
export function subscribeKvEvents(router: Router, instance: string, endpoints: KvEventEndpoints): KvEventSubscription {
  const name = describe(instance);
  if (typeof endpoints !== 'object' || endpoints === null)
    throw rangeError('ERR_KVROUTE_INVALID_ARG_VALUE', `KV event endpoints of ${name} must be { endpoint, replay? }`);
  const endpoint = endpointOption(`kvEvents of ${name}`, endpoints.endpoint);
  const replay = endpoints.replay === undefined ? undefined : endpointOption(`kvReplay of ${name}`, endpoints.replay);
  const subscription = new ZmqKvEventSubscription(endpoint, replay);
  subscription.start(router.kvEventSink(instance, subscription));
  return subscription;
}

/** Checks an endpoint, naming the field the caller knows it by. */
export function endpointOption(field: string, raw: unknown): string {
  const endpoint = parseZmqEndpoint(raw);
  if (endpoint === undefined)
    throw rangeError(
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      `${field} must be ${ZMQ_ENDPOINT_EXPECTED}, got ${describe(raw)}`,
    );
  return endpoint;
}

/** One packer for every subscription: apply() is synchronous, so they never share it at once. */
const packer = new KvEventPacker();

class ZmqKvEventSubscription implements KvEventSinkOwner, KvEventSubscription {
  private feed: KvEventFeed | undefined;
  private sink: KvEventSink | undefined;
  /** Messages the packer refused (beyond what the subscriber counted). */
  private refused = 0;
  private lastRefusal: string | undefined;

  constructor(
    private readonly endpoint: string,
    private readonly replay: string | undefined,
  ) {}

  start(sink: KvEventSink): void {
    this.sink = sink;
    const feed = new KvEventFeed({
      endpoint: this.endpoint,
      replay: this.replay,
      onWarning: (message) => sink.warn(message),
      sink: {
        apply: (messages) => this.apply(sink, messages),
        clear: () => sink.clear(),
        setFed: (fed) => sink.setFed(fed),
      },
    });
    this.feed = feed;
    feed.start().catch((error: unknown) => {
      sink.warn(`cannot subscribe to KV events at ${this.endpoint}: ${(error as Error).message}`);
    });
  }

  close(): Promise<void> {
    const feed = this.feed;
    if (feed === undefined) return Promise.resolve();
    this.feed = undefined;
    this.sink?.setFed(false);
    return feed.close();
  }

  stats(): KvEventInstanceStats {
    const f = this.feed!.stats();
    const index = this.sink!.indexStats();
    return {
      endpoint: f.endpoint,
      replay: f.replay,
      state: f.state,
      ...index,
      messages: f.messages,
      malformed: f.malformed + this.refused,
      unknownEvents: f.unknownEvents,
      gaps: f.gaps,
      missing: f.missing,
      stale: f.stale,
      restarts: f.restarts,
      replays: f.replays,
      replayFailures: f.replayFailures,
      rebuilds: f.rebuilds,
      disconnects: f.disconnects,
      lastError: this.lastRefusal ?? f.lastError,
    };
  }

  private apply(sink: KvEventSink, messages: readonly KvEventMessage[]): void {
    packer.reset();
    for (const message of messages) {
      try {
        packer.addBatch(message.batch);
      } catch (error) {
        if (!(error instanceof KvEventFormatError)) throw error;
        this.refused++;
        this.lastRefusal = error.message;
      }
    }
    sink.apply(packer);
  }
}
