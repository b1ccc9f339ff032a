/**
 * The router's KV event feeds: one KvEventFeed per event-fed instance, each feeding that slot's
 * event index in the core (docs/kv-events.md).
 *
 * Invariants:
 * - a slot has at most one feed; removing the instance closes it before the slot can be reused,
 *   and a closed feed never touches the core again (KvEventFeed drops what arrives after close);
 * - a message's events reach the core in one batched applyKvEvents() per event-loop turn (the
 *   feed coalesces; the packer reuses its buffers);
 * - a message the packer refuses (e.g. a token id past 32 bits) is counted as malformed and
 *   skipped alone: the packer rolls it back, the turn's other messages are applied.
 */
import { EVENT_STAT_FIELDS, EventStat, type CoreRouter } from '../core/core-router.js';
import type { KvEventInstanceStats } from '../core/types.js';
import { KvEventFormatError, type KvEventMessage } from './kv-event-batch.js';
import { KvEventFeed } from './kv-event-feed.js';
import { KvEventPacker } from './packed-kv-events.js';

interface SlotFeed {
  feed: KvEventFeed;
  /** Messages the packer refused (beyond what the subscriber counted). */
  refused: number;
  lastRefusal: string | undefined;
}

export class InstanceKvFeeds {
  private readonly feeds = new Map<number, SlotFeed>();
  private readonly packer = new KvEventPacker();
  private readonly statsBuf = new Float64Array(EVENT_STAT_FIELDS);

  constructor(
    private readonly core: CoreRouter,
    private readonly warn: (message: string) => void,
  ) {}

  /** Starts feeding `slot` from `endpoint` (and `replay`); failures to start are warned, not thrown. */
  subscribe(slot: number, instance: string, endpoint: string, replay: string | undefined): void {
    if (this.feeds.has(slot)) throw new Error(`InstanceKvFeeds: slot ${slot} is already fed`);
    const entry: SlotFeed = { feed: undefined!, refused: 0, lastRefusal: undefined };
    entry.feed = new KvEventFeed({
      endpoint,
      replay,
      onWarning: (message) => this.warn(`instance ${instance}: ${message}`),
      sink: {
        apply: (messages) => this.apply(slot, entry, messages),
        clear: () => this.core.clearKvEvents(slot),
        setFed: (fed) => this.core.setEventFed(slot, fed),
      },
    });
    this.feeds.set(slot, entry);
    entry.feed.start().catch((error: unknown) => {
      this.warn(`instance ${instance}: cannot subscribe to KV events at ${endpoint}: ${(error as Error).message}`);
    });
  }

  has(slot: number): boolean {
    return this.feeds.has(slot);
  }

  /** Stops feeding `slot` (its instance is being removed). */
  unsubscribe(slot: number): Promise<void> {
    const entry = this.feeds.get(slot);
    if (entry === undefined) return Promise.resolve();
    this.feeds.delete(slot);
    this.core.setEventFed(slot, false);
    return entry.feed.close();
  }

  stats(slot: number): KvEventInstanceStats | null {
    const entry = this.feeds.get(slot);
    if (entry === undefined) return null;
    const f = entry.feed.stats();
    const b = this.statsBuf;
    this.core.eventStats(slot, b);
    return {
      endpoint: f.endpoint,
      replay: f.replay,
      state: f.state,
      fed: b[EventStat.EventFed] === 1,
      heldKeys: b[EventStat.HeldKeys]!,
      engineBlocks: b[EventStat.EngineBlocks]!,
      stored: b[EventStat.Stored]!,
      removed: b[EventStat.Removed]!,
      cleared: b[EventStat.Cleared]!,
      ignored: b[EventStat.Ignored]!,
      orphaned: b[EventStat.Orphaned]!,
      unknownRemoved: b[EventStat.UnknownRemoved]!,
      messages: f.messages,
      malformed: f.malformed + entry.refused,
      unknownEvents: f.unknownEvents,
      gaps: f.gaps,
      missing: f.missing,
      stale: f.stale,
      restarts: f.restarts,
      replays: f.replays,
      replayFailures: f.replayFailures,
      rebuilds: f.rebuilds,
      disconnects: f.disconnects,
      lastError: entry.lastRefusal ?? f.lastError,
    };
  }

  async close(): Promise<void> {
    const slots = [...this.feeds.keys()];
    await Promise.all(slots.map((slot) => this.unsubscribe(slot)));
  }

  private apply(slot: number, entry: SlotFeed, messages: readonly KvEventMessage[]): void {
    const packer = this.packer;
    packer.reset();
    for (const message of messages) {
      try {
        packer.addBatch(message.batch);
      } catch (error) {
        if (!(error instanceof KvEventFormatError)) throw error;
        entry.refused++;
        entry.lastRefusal = error.message;
      }
    }
    this.core.applyKvEvents(slot, packer);
  }
}
