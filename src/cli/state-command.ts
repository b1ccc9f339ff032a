/**
 * `kvroute state watch | publish | freshness`, declared; state-verb.ts runs `watch` and
 * `publish`, state-freshness-verb.ts runs `freshness`.
 */
import type { Command } from 'commander';

import { example, runs, subcommand, withDefault } from './command-kit.js';
import { STATE_DEFAULTS } from './defaults/state-defaults.js';

const FEED = ['<NAME>', 'the feed /dev/shm/NAME, or a path'] as const;

export function addStateCommand(program: Command): void {
  const d = STATE_DEFAULTS;
  const state = subcommand(program, 'state', 'the engine-state feed in shared memory: watch, publish, freshness');
  example(
    state,
    'kvroute sim serve --instances 2 --port 8101 & sleep 1',
    'kvroute state publish --engines http://127.0.0.1:8101,http://127.0.0.1:8102 --shm kvroute-feed --rounds 10',
    'kvroute state watch kvroute-feed --once --json',
    'kill $!',
  );

  const watch = subcommand(state, 'watch', 'the feed as a live table, one row per published slot, or one reading')
    .argument(...FEED)
    .option('--once', 'one reading, then exit (1 when the feed is missing or malformed)')
    .option('--json', 'print readings as JSON')
    .option('--interval <MS>', withDefault('refresh period of the live table', d.watchIntervalMs));
  example(
    watch,
    'kvroute state publish --engines http://127.0.0.1:8101 --shm kvroute-feed --rounds 1',
    'kvroute state watch kvroute-feed',
  );
  runs(watch, async () => (await import('./state-verb.js')).watchVerb);

  const publish = subcommand(
    state,
    'publish',
    "scrape engines' /metrics (vLLM or SGLang) into the feed, slot i = engine i",
  )
    .option('--engines <URL,…>', 'the engines, comma-separated (required)')
    .option('--shm <NAME>', 'the feed /dev/shm/NAME, or a path (required)')
    .option('--interval <MS>', withDefault('scrape period', d.publishIntervalMs))
    .option('--timeout <MS>', withDefault('an engine slower than this is marked unreachable', d.publishTimeoutMs))
    .option('--rounds <N>', withDefault('stop after N rounds', 'until SIGINT or SIGTERM'));
  example(publish, 'kvroute state publish --engines http://127.0.0.1:8101,http://127.0.0.1:8102 --shm kvroute-feed');
  runs(publish, async () => (await import('./state-verb.js')).publishVerb);

  const freshness = subcommand(
    state,
    'freshness',
    'sample the age of each snapshot at read time: median, p99, % older than the staleness',
  )
    .argument(...FEED)
    .option('--duration <MS>', withDefault('how long to sample', d.freshnessDurationMs))
    .option('--sample <MS>', withDefault('mean ms between readings, jittered', d.freshnessSampleMs))
    .option('--staleness <MS>', withDefault("the router's staleness limit", d.stalenessMs))
    .option('--json', 'one JSON object instead of the table');
  example(
    freshness,
    'kvroute state publish --engines http://127.0.0.1:8101 --shm kvroute-feed & sleep 1',
    'kvroute state freshness kvroute-feed --duration 5000',
    'kill $!',
  );
  runs(freshness, async () => (await import('./state-freshness-verb.js')).freshnessVerb);
}
