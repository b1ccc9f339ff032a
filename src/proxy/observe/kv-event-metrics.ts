/**
 * The KV event feeds and the tokenizer in /metrics (docs/kv-events.md, docs/proxy.md): read from
 * router.stats() and the tokenizer pool at scrape time, so the hot path pays nothing. Counters are
 * cumulative since the instance was added; a removed instance's series disappear with it.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

import type { KvEventInstanceStats } from '../../core/types.js';
import type { ProxyState } from '../proxy-state.js';

/** One scrape's feeds, read once however many metrics ask. */
function feedsOf(state: ProxyState | undefined): Array<[string, KvEventInstanceStats]> {
  if (state === undefined) return [];
  return state.router
    .stats()
    .instances.flatMap((i) =>
      i.kvEvents === null ? [] : [[i.instance, i.kvEvents] as [string, KvEventInstanceStats]],
    );
}

export function registerKvEventMetrics(registry: Registry, getState: () => ProxyState | undefined): void {
  const registers = [registry];
  let scrape: Array<[string, KvEventInstanceStats]> = [];
  let scrapedAt = -Infinity;
  // Every collect() of one scrape runs within a few ms: they share one router.stats().
  const feeds = () => {
    const now = performance.now();
    if (now - scrapedAt > 50) {
      scrape = feedsOf(getState());
      scrapedAt = now;
    }
    return scrape;
  };
  const gauge = (name: string, help: string, read: (f: KvEventInstanceStats) => number) =>
    new Gauge({
      name,
      help,
      labelNames: ['instance'] as const,
      registers,
      collect() {
        this.reset();
        for (const [instance, f] of feeds()) this.set({ instance }, read(f));
      },
    });
  const counter = (name: string, help: string, read: (f: KvEventInstanceStats) => number) =>
    new Counter({
      name,
      help,
      labelNames: ['instance'] as const,
      registers,
      collect() {
        this.reset();
        for (const [instance, f] of feeds()) this.inc({ instance }, read(f));
      },
    });

  gauge(
    'kvroute_kv_events_fed',
    "1 while routing reads the instance's event-fed index; 0 while it falls back to the belief index (not connected, or a gap being replayed).",
    (f) => (f.fed ? 1 : 0),
  );
  gauge(
    'kvroute_kv_events_held_blocks',
    'Token blocks the engine reports it holds (the event-fed index).',
    (f) => f.heldKeys,
  );
  counter('kvroute_kv_events_messages_total', 'KV event messages received and decoded.', (f) => f.messages);
  counter(
    'kvroute_kv_events_malformed_total',
    'KV event messages skipped as malformed (not msgpack, a bad field); the last reason is in router.stats().',
    (f) => f.malformed,
  );
  new Counter({
    name: 'kvroute_kv_events_blocks_total',
    help: 'Blocks by what the events did: stored, removed, ignored (another medium or a LoRA adapter), orphaned (unknown parent), unknown_removed.',
    labelNames: ['instance', 'event'] as const,
    registers,
    collect() {
      this.reset();
      for (const [instance, f] of feeds()) {
        this.inc({ instance, event: 'stored' }, f.stored);
        this.inc({ instance, event: 'removed' }, f.removed);
        this.inc({ instance, event: 'ignored' }, f.ignored);
        this.inc({ instance, event: 'orphaned' }, f.orphaned);
        this.inc({ instance, event: 'unknown_removed' }, f.unknownRemoved);
      }
    },
  });
  counter('kvroute_kv_events_gaps_total', 'Sequence gaps in the event stream (messages lost).', (f) => f.gaps);
  counter('kvroute_kv_events_missing_messages_total', 'Messages the gaps skipped.', (f) => f.missing);
  counter('kvroute_kv_events_replays_total', 'Replay requests sent for gaps.', (f) => f.replays);
  counter(
    'kvroute_kv_events_replay_failures_total',
    'Replays that failed or no longer held the gap (the index was rebuilt).',
    (f) => f.replayFailures,
  );
  counter(
    'kvroute_kv_events_rebuilds_total',
    'Times the event-fed index was cleared to be rebuilt from new events.',
    (f) => f.rebuilds,
  );
  counter('kvroute_kv_events_restarts_total', 'Engine restarts seen (seq back to 0).', (f) => f.restarts);
  counter('kvroute_kv_events_disconnects_total', 'Times the event endpoint disconnected.', (f) => f.disconnects);

  new Gauge({
    name: 'kvroute_tokenizer_queue_depth',
    help: 'Requests waiting for or being tokenized on the tokenizer workers.',
    registers,
    collect() {
      const pool = getState()?.tokenizer;
      this.set(pool === undefined ? 0 : pool.stats().inFlight);
    },
  });
  new Counter({
    name: 'kvroute_tokenizer_tokens_total',
    help: "Prompt tokens from the tokenizer workers: encoded, or reused from the session's previous turn.",
    labelNames: ['how'] as const,
    registers,
    collect() {
      this.reset();
      const pool = getState()?.tokenizer;
      if (pool === undefined) return;
      const s = pool.stats();
      this.inc({ how: 'encoded' }, s.encodedTokens);
      this.inc({ how: 'reused' }, s.reusedTokens);
    },
  });
  new Counter({
    name: 'kvroute_tokenizer_refused_total',
    help: 'Tokenizations refused because the queue was full (those requests were keyed by text).',
    registers,
    collect() {
      this.reset();
      this.inc(getState()?.tokenizer?.stats().rejectedBusy ?? 0);
    },
  });
}
