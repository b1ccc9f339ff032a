/**
 * KV events an embedder hands the router itself (Router.applyKvEvents; docs/kv-events.md, "Events
 * from elsewhere"): a replica that receives its engines' events over its own transport (a relay,
 * NATS, a log it replays), or a simulator feeding every replica the same events.
 *
 * Invariants:
 * - an input is checked whole before anything is applied: a malformed event throws
 *   KvEventFormatError (ERR_KVROUTE_KV_EVENT) naming its field, and the core sees nothing of it;
 * - the first applied input makes the slot event-fed (routing answers its token-keyed matches
 *   from these events); the flag lives in the core alone, which clears it when the instance is
 *   removed, so a new instance on the slot starts unfed;
 * - a slot fed by its own subscription (InstanceKvFeeds) is refused: two writers would interleave
 *   two sequences into one index.
 */
import { EVENT_STAT_FIELDS, EventStat, type CoreRouter } from '../core/core-router.js';
import { invalidType } from '../core/errors.js';
import { KvEventPacker } from './packed-kv-events.js';

/** What one applyKvEvents() call applied. */
export interface AppliedKvEvents {
  /** Events applied (stored, removed and cleared). */
  events: number;
  /** Events of a type this version does not know, skipped. */
  unknownEvents: number;
}

export class DirectKvEvents {
  private readonly packer = new KvEventPacker();
  private readonly statsBuf = new Float64Array(EVENT_STAT_FIELDS);

  constructor(private readonly core: CoreRouter) {}

  /** Packs `input` (a msgpack KVEventBatch payload, or its events unpacked) and applies it to `slot`. */
  apply(slot: number, input: unknown): AppliedKvEvents {
    const packer = this.packer;
    packer.reset();
    let unknownEvents: number;
    if (input instanceof Uint8Array) unknownEvents = packer.addPayload(input).unknownEvents;
    else if (Array.isArray(input)) unknownEvents = packer.addRawEvents(input);
    else throw invalidType('events', 'a msgpack KVEventBatch payload (Uint8Array) or an array of events', input);
    // setEventFed recomputes the core's fed mask: only on the slot's first call.
    this.core.eventStats(slot, this.statsBuf);
    if (this.statsBuf[EventStat.EventFed] !== 1) this.core.setEventFed(slot, true);
    if (packer.events > 0) this.core.applyKvEvents(slot, packer);
    return { events: packer.events, unknownEvents };
  }
}
