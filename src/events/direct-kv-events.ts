/**
 * applyKvEvents: KV events an embedder hands a router itself (docs/kv-events.md, "Events from
 * elsewhere"): a replica that receives its engines' events over its own transport (a relay,
 * NATS, a log it replays), or a simulator feeding every replica the same events. They go in
 * through the instance's KvEventSink (src/core/kv-event-sink.ts), as a subscription's do.
 *
 * Invariants:
 * - an input is checked whole before anything is applied: a malformed event throws
 *   KvEventFormatError (ERR_KVROUTE_KV_EVENT) naming its field, and the core sees nothing of it;
 * - the first applied input makes the instance event-fed (routing answers its token-keyed matches
 *   from these events); the flag lives in the core alone, which clears it when the instance is
 *   removed, so a new instance on the slot starts unfed;
 * - an instance fed by its own subscription (subscribeKvEvents) is refused: its sink has an
 *   owner, and two writers would interleave two sequences into one index.
 */
import { invalidType } from '../core/errors.js';
import type { Router } from '../core/router.js';
import { KvEventPacker } from './packed-kv-events.js';

/** What one applyKvEvents() call applied. */
export interface AppliedKvEvents {
  /** Events applied (stored, removed and cleared). */
  events: number;
  /** Events of a type this version does not know, skipped. */
  unknownEvents: number;
}

/** One packer for every call: a call packs and applies synchronously, reusing its buffers. */
const packer = new KvEventPacker();

/**
 * Feeds `instance` of `router` from its engine's KV events received some other way than a
 * subscription. `events` is one vLLM KVEventBatch payload as its msgpack bytes (the third frame of
 * the engine's ZMQ message), or that batch's `events` already unpacked (each an array or a map,
 * as vLLM encodes them). The first call makes the instance event-fed: requests given as `tokens`
 * then match it from these events. Calls must come in the engine's order.
 *
 * Checked whole first: a malformed event throws ERR_KVROUTE_KV_EVENT naming its field, and nothing
 * of the call is applied. Events of unknown types are skipped and counted.
 */
export function applyKvEvents(
  router: Router,
  instance: string,
  events: Uint8Array | readonly unknown[],
): AppliedKvEvents {
  const sink = router.kvEventSink(instance);
  packer.reset();
  let unknownEvents: number;
  if (events instanceof Uint8Array) unknownEvents = packer.addPayload(events).unknownEvents;
  else if (Array.isArray(events)) unknownEvents = packer.addRawEvents(events);
  else throw invalidType('events', 'a msgpack KVEventBatch payload (Uint8Array) or an array of events', events);
  // setFed recomputes the core's fed mask: only on the instance's first call.
  if (!sink.fed) sink.setFed(true);
  if (packer.events > 0) sink.apply(packer);
  return { events: packer.events, unknownEvents };
}
