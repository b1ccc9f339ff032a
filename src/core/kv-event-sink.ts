/**
 * The one way KV events enter a router: a KvEventSink per instance, handed out by
 * Router.kvEventSink(). The core owns the event-fed index; it never owns the transport that
 * feeds it (ZeroMQ, a relay, a replayed log). Whoever receives the engine's events (src/events:
 * subscribeKvEvents for a ZMQ subscription, applyKvEvents for events received elsewhere) packs
 * them (PackedKvEvents, core-router.ts) and applies them here.
 *
 * Invariants:
 * - one sink per instance slot, made on first ask and reused; removing the instance closes it,
 *   and a closed sink ignores every call, so a feed's late messages never touch a slot that a
 *   new instance may reuse;
 * - at most one owner per sink (a subscription that feeds it as its only writer): asking for an
 *   owned sink again throws ERR_KVROUTE_KV_EVENT, as two writers would interleave two sequences
 *   into one index;
 * - the event-fed flag lives in the core alone: only setFed() changes it (apply() does not), and
 *   the core clears it when the instance is removed.
 */
import {
  EVENT_STAT_FIELDS,
  EventStat,
  PACKED_OP_STORED,
  PACKED_OP_WORDS,
  type CoreRouter,
  type PackedKvEvents,
} from './core-router.js';
import type { KvEventIndexStats, KvEventInstanceStats } from './types.js';

export type { KvEventIndexStats } from './types.js';

/**
 * What owns a sink: a subscription that is the instance's only writer. The router reports its
 * stats() in `router.stats().instances[i].kvEvents` and closes it when the instance is removed
 * or the router closed.
 */
export interface KvEventSinkOwner {
  stats(): KvEventInstanceStats;
  close(): Promise<void>;
}

/** One instance's way into the core's event-fed index. */
export interface KvEventSink {
  /** The instance it feeds. */
  readonly instance: string;
  /** False once the instance was removed: every call is then ignored. */
  readonly open: boolean;
  /** Whether routing reads the instance's event index now (the core's flag; one read, no allocation). */
  readonly fed: boolean;
  /** Applies one packed run of the engine's events, in order (all or nothing: see PackedKvEvents). */
  apply(packed: PackedKvEvents): void;
  /** Empties the instance's event index (its counters stay). */
  clear(): void;
  /** Routes the instance's token-keyed matches from its events (true) or its belief index (false). */
  setFed(fed: boolean): void;
  /** The core's counters for the instance's event index (zeros once closed). */
  indexStats(): KvEventIndexStats;
  /** Reports through the router's onWarning, prefixed with the instance. */
  warn(message: string): void;
}

/** The sink of one slot; the router keeps it until the instance is removed. */
export class SlotKvEventSink implements KvEventSink {
  open = true;
  owner: KvEventSinkOwner | undefined;
  private readonly statsBuf = new Float64Array(EVENT_STAT_FIELDS);
  /** Whether a stored block of another size than the router's was reported (warned once). */
  private warnedBlockSize = false;

  constructor(
    private readonly core: CoreRouter,
    private readonly slot: number,
    readonly instance: string,
    private readonly onWarning: (message: string) => void,
    /** The router's tokens per block: what a request's token keys are made of. */
    private readonly blockSize: number,
  ) {}

  get fed(): boolean {
    if (!this.open) return false;
    this.core.eventStats(this.slot, this.statsBuf);
    return this.statsBuf[EventStat.EventFed] === 1;
  }

  apply(packed: PackedKvEvents): void {
    if (!this.open) return;
    if (!this.warnedBlockSize) this.checkBlockSize(packed);
    this.core.applyKvEvents(this.slot, packed);
  }

  /**
   * Blocks of another size are keyed as given and can never match a request's keys: an engine
   * configured apart from the router (SGLang's default page is 1 token; kvroute's block 16).
   * Said once, naming both sizes, since every later event would repeat it.
   */
  private checkBlockSize(packed: PackedKvEvents): void {
    for (let i = 0; i + PACKED_OP_WORDS <= packed.opsLength; i += PACKED_OP_WORDS) {
      if (packed.ops[i] !== PACKED_OP_STORED) continue;
      const size = packed.ops[i + 3]!;
      if (size === this.blockSize) continue;
      this.warnedBlockSize = true;
      this.warn(
        `the engine stores blocks of ${size} tokens and the router keys blocks of ${this.blockSize}; its cache will not match any request until they agree (vLLM --block-size, SGLang --page-size, kvroute --block-size)`,
      );
      return;
    }
  }

  clear(): void {
    if (this.open) this.core.clearKvEvents(this.slot);
  }

  setFed(fed: boolean): void {
    if (this.open) this.core.setEventFed(this.slot, fed);
  }

  indexStats(): KvEventIndexStats {
    const b = this.statsBuf;
    if (this.open) this.core.eventStats(this.slot, b);
    else b.fill(0);
    return {
      fed: b[EventStat.EventFed] === 1,
      heldKeys: b[EventStat.HeldKeys]!,
      engineBlocks: b[EventStat.EngineBlocks]!,
      stored: b[EventStat.Stored]!,
      removed: b[EventStat.Removed]!,
      cleared: b[EventStat.Cleared]!,
      ignored: b[EventStat.Ignored]!,
      orphaned: b[EventStat.Orphaned]!,
      unknownRemoved: b[EventStat.UnknownRemoved]!,
    };
  }

  warn(message: string): void {
    this.onWarning(`instance ${this.instance}: ${message}`);
  }

  /** The instance is being removed (before the core frees the slot): closes the owner too. */
  close(): Promise<void> {
    this.open = false;
    const owner = this.owner;
    this.owner = undefined;
    return owner?.close() ?? Promise.resolve();
  }
}
