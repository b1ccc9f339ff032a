/**
 * `kvroute events relay`, declared; events-relay-verb.ts runs it.
 */
import type { Command } from 'commander';

import { example, runs, subcommand, withDefault } from './command-kit.js';
import { EVENTS_DEFAULTS } from './defaults/events-defaults.js';

export function addEventsCommand(program: Command): void {
  const d = EVENTS_DEFAULTS;
  const events = subcommand(program, 'events', "engines' KV cache events on the fleet's NATS event plane: relay");
  example(
    events,
    'kvroute events relay --nats nats://127.0.0.1:4222 --backends http://127.0.0.1:8101 --kv-events tcp://127.0.0.1:5557',
  );
  const relay = subcommand(
    events,
    'relay',
    "republish engines' vLLM KV events (ZeroMQ, replay on a gap) to the fleet's JetStream stream, one subject per engine",
  )
    .option(
      '--nats <URL>',
      'the NATS server, nats://HOST:PORT or nats://HOST:PORT/FLEET (required; fleet default: default)',
    )
    .option('--backends <URL,…>', "the engines' base URLs, as the replicas' --backends name them (required)")
    .option('--kv-events <URL,…>', "each engine's KV event endpoint (tcp://HOST:PORT), in --backends order (required)")
    .option(
      '--kv-replay <URL,…>',
      "each engine's KV event replay endpoint, in --backends order; an empty entry skips one",
    )
    .option(
      '--max-age <DURATION>',
      withDefault('the stream drops events older than this (e.g. 90s, 15m, 1h, or ms)', d.maxAge),
    )
    .option(
      '--max-bytes <SIZE>',
      withDefault('and keeps at most this much, oldest dropped first (e.g. 512MiB)', d.maxBytes),
    )
    .option('--stats-interval <MS>', withDefault('log a line of counts this often; 0: never', d.statsIntervalMs));
  example(
    relay,
    'kvroute sim serve --instances 2 --port 8101 --kv-events 5557 --kv-events-replay 5567 &',
    'kvroute events relay --nats nats://127.0.0.1:4222 --backends http://127.0.0.1:8101,http://127.0.0.1:8102 \\',
    '  --kv-events tcp://127.0.0.1:5557,tcp://127.0.0.1:5558 --kv-replay tcp://127.0.0.1:5567,tcp://127.0.0.1:5568 &',
    'kvroute serve --backends http://127.0.0.1:8101,http://127.0.0.1:8102 --events nats://127.0.0.1:4222',
  );
  runs(relay, async () => (await import('./events-relay-verb.js')).relayVerb);
}
