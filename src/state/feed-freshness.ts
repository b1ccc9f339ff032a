/**
 * The feed's freshness as the router sees it: the age of each slot's snapshot at the moment it is
 * read (the reference experiments' `fresh_sampler`; its median was 25 ms with a 50 ms publish period).
 *
 * Reads come at jittered intervals (uniform in [0.5, 1.5] × `sampleMs`) so they do not phase-lock
 * with a writer's fixed period, which would bias every age the same way. A slot the reader cannot
 * read (never published, or its seqlock busy through every retry) counts as unreadable, not as
 * an age. Ages are on the wall clock (CLOCK_REALTIME), as the router's staleness check is.
 */
import { setTimeout as sleep } from 'node:timers/promises';

import type { StateFeedReader } from './shm-feed.js';

export interface FreshnessOptions {
  /** How long to sample (ms). */
  durationMs: number;
  /** Mean ms between two readings of the feed (default 10). */
  sampleMs?: number;
  signal?: AbortSignal;
}

/** Every age read from one slot. */
export interface SlotAges {
  slot: number;
  /** The id the slot last carried. */
  instance: string;
  /** ms, one per reading. */
  ages: number[];
  /** Readings that found no consistent snapshot. */
  unreadable: number;
  /** Readings of a snapshot flagged unreachable by its writer. */
  unreachable: number;
}

/** Samples every slot of the feed for `durationMs`; slots never published are left out. */
export async function sampleFeedFreshness(reader: StateFeedReader, options: FreshnessOptions): Promise<SlotAges[]> {
  const sampleMs = options.sampleMs ?? 10;
  const slots = new Map<number, SlotAges>();
  const until = Date.now() + options.durationMs;
  while (Date.now() < until && options.signal?.aborted !== true) {
    reader.refresh();
    for (let slot = 0; slot < reader.slots; slot++) {
      const snapshot = reader.read(slot);
      const ages = slots.get(slot) ?? { slot, instance: '', ages: [], unreadable: 0, unreachable: 0 };
      if (snapshot === undefined) {
        if (slots.has(slot)) ages.unreadable++;
        continue;
      }
      ages.ages.push(Date.now() - snapshot.timestampMs);
      ages.instance = snapshot.instance;
      if (snapshot.unreachable) ages.unreachable++;
      slots.set(slot, ages);
    }
    const pause = sampleMs * (0.5 + Math.random());
    await sleep(pause, undefined, options.signal === undefined ? {} : { signal: options.signal }).catch(() => {});
  }
  return [...slots.values()].sort((a, b) => a.slot - b.slot);
}
