/**
 * `kvroute state publish`: scrapes each engine's `/metrics` every interval and publishes what it
 * reads into the engine-state feed, slot i for engine i (docs/shm-layout.md).
 *
 * An engine that does not answer in time, answers with an error, or serves no known gauges is
 * marked unreachable in its slot (its last known counts stay, with a fresh timestamp and the
 * flag), never dropped; the router ignores flagged slots. The publisher keeps running.
 */
import { setTimeout as delay } from 'node:timers/promises';

import { scrapeEngineCounts } from './engine-metrics-scrape.js';
import { StateFeedWriter, type EngineCounts } from './shm-feed.js';

export interface PublisherOptions {
  /** Engine base URLs, e.g. http://127.0.0.1:8000. */
  engines: readonly string[];
  /** Feed name under /dev/shm, or a path. */
  shm: string;
  /** ms between scrapes of one engine (default 50). */
  intervalMs?: number;
  /** ms a scrape may take before the engine counts as unreachable (default 1,000). */
  timeoutMs?: number;
  /** Stop after this many rounds (default: until `signal` aborts). */
  rounds?: number;
  signal?: AbortSignal;
  /** Hears when an engine becomes unreachable or comes back. */
  onChange?: (engine: string, reachable: boolean, why: string) => void;
}

const EMPTY: EngineCounts = {
  running: 0,
  waiting: 0,
  kvBlocksUsed: 0,
  kvBlocksTotal: 0,
  pendingPrefillTokens: 0,
  maxPrefillRemaining: 0,
  decodeBatch: 0,
};

/** Runs the publisher; resolves after `rounds` rounds or when `signal` aborts. */
export async function publishEngineMetrics(options: PublisherOptions): Promise<void> {
  const { engines } = options;
  const writer = new StateFeedWriter(options.shm, { slots: engines.length });
  const interval = options.intervalMs ?? 50;
  const last: EngineCounts[] = engines.map(() => EMPTY);
  const reachable: boolean[] = engines.map(() => true);
  const ids = engines.map((url) => new URL(url).host);
  try {
    for (let round = 0; options.rounds === undefined || round < options.rounds; round++) {
      if (options.signal?.aborted) return;
      const started = performance.now();
      await Promise.all(
        engines.map(async (url, slot) => {
          const result = await scrapeEngineCounts(url, options.timeoutMs ?? 1_000);
          const ok = typeof result !== 'string';
          if (ok) last[slot] = result;
          if (ok !== reachable[slot]) options.onChange?.(url, ok, ok ? 'answers again' : result);
          reachable[slot] = ok;
          writer.publish(slot, ids[slot]!, last[slot]!, { unreachable: !ok });
        }),
      );
      const wait = interval - (performance.now() - started);
      if (wait > 0) await sleep(wait, options.signal);
    }
  } finally {
    writer.close();
  }
}

/** Waits `ms`, or less when `signal` aborts. */
async function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  await delay(ms, undefined, signal === undefined ? {} : { signal }).catch(() => undefined);
}
