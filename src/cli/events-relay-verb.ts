/**
 * `kvroute events relay` (declared in events-command.ts): engines' KV events from ZeroMQ into the
 * fleet's JetStream stream (src/events/nats/event-relay.ts). Runs until SIGINT or SIGTERM, then
 * waits (bounded) for NATS to acknowledge what it published.
 */
import { parseNatsEventSource, NATS_EVENT_SOURCE_EXPECTED } from '../events/nats/nats-event-source.js';
import { EventRelay, type RelayedEngine } from '../events/nats/event-relay.js';
import { parseZmqEndpoint, ZMQ_ENDPOINT_EXPECTED } from '../events/zmq-endpoint.js';
import { normaliseBackend, ProxyOptionError } from '../proxy/upstream/backend-spec.js';
import { integerFlag, stringFlag, untilStopped, UsageError, type OptionValues } from './common.js';
import { EVENTS_DEFAULTS } from './defaults/events-defaults.js';
import { parseByteSize } from './byte-size.js';

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `90s`, `15m`, `1h`, `2d`, or milliseconds. */
export function parseDuration(raw: string, flag: string): number {
  const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/.exec(raw.trim());
  const ms = match === null ? NaN : Number(match[1]) * DURATION_UNITS[match[2] ?? 'ms']!;
  if (!(ms >= 1000 && Number.isSafeInteger(Math.round(ms))))
    throw new UsageError(`--${flag} must be a duration of at least 1 s (e.g. 90s, 15m, 1h, or ms), got ${raw}`);
  return Math.round(ms);
}

/** `512MiB`, `1GiB`, `1000000` bytes. */
export function parseSize(raw: string, flag: string): number {
  const bytes = parseByteSize(raw);
  if (!(bytes >= 65_536 && Number.isSafeInteger(bytes)))
    throw new UsageError(`--${flag} must be a size of at least 64KiB (e.g. 512MiB, 1GiB, or bytes), got ${raw}`);
  return bytes;
}

function list(values: OptionValues, flag: string): string[] | undefined {
  const raw = stringFlag(values, flag);
  return raw === undefined ? undefined : raw.split(',').map((s) => s.trim());
}

/** The engines from --backends, --kv-events and --kv-replay, each checked and named by its flag. */
export function relayedEngines(values: OptionValues): RelayedEngine[] {
  const backends = list(values, 'backends')?.filter((b) => b !== '');
  const events = list(values, 'kv-events');
  const replays = list(values, 'kv-replay');
  if (backends === undefined || backends.length === 0)
    throw new UsageError("--backends is required: the engines' base URLs");
  if (events === undefined) throw new UsageError("--kv-events is required: each engine's KV event endpoint");
  if (events.length !== backends.length)
    throw new UsageError(
      `--kv-events lists ${events.length} endpoints for ${backends.length} backends: one per backend, in order`,
    );
  if (replays !== undefined && replays.length > backends.length)
    throw new UsageError(
      `--kv-replay lists ${replays.length} endpoints for ${backends.length} backends: at most one per backend`,
    );
  const engines = backends.map((url, k): RelayedEngine => {
    let engine: string;
    try {
      engine = normaliseBackend(url, `--backends entry ${k + 1}`);
    } catch (error) {
      if (error instanceof ProxyOptionError) throw new UsageError(error.message);
      throw error;
    }
    const endpoint = parseZmqEndpoint(events[k]);
    if (endpoint === undefined)
      throw new UsageError(
        `--kv-events entry ${k + 1} must be ${ZMQ_ENDPOINT_EXPECTED}, got ${JSON.stringify(events[k])}`,
      );
    const replayRaw = replays?.[k] ?? '';
    const replay = replayRaw === '' ? undefined : parseZmqEndpoint(replayRaw);
    if (replayRaw !== '' && replay === undefined)
      throw new UsageError(
        `--kv-replay entry ${k + 1} must be ${ZMQ_ENDPOINT_EXPECTED}, got ${JSON.stringify(replayRaw)}`,
      );
    return { engine, endpoint, ...(replay === undefined ? {} : { replay }) };
  });
  if (new Set(engines.map((e) => e.engine)).size !== engines.length)
    throw new UsageError('--backends lists the same engine twice');
  return engines;
}

export async function relayVerb(values: OptionValues): Promise<void> {
  const natsRaw = stringFlag(values, 'nats');
  if (natsRaw === undefined) throw new UsageError('--nats is required: the NATS server, nats://HOST:PORT[/FLEET]');
  const source = parseNatsEventSource(natsRaw, 'default');
  if (source === undefined) throw new UsageError(`--nats must be ${NATS_EVENT_SOURCE_EXPECTED}, got ${natsRaw}`);
  const engines = relayedEngines(values);
  const maxAgeMs = parseDuration(stringFlag(values, 'max-age') ?? EVENTS_DEFAULTS.maxAge, 'max-age');
  const maxBytes = parseSize(stringFlag(values, 'max-bytes') ?? EVENTS_DEFAULTS.maxBytes, 'max-bytes');
  const statsMs = integerFlag(values, 'stats-interval', 0) ?? EVENTS_DEFAULTS.statsIntervalMs;
  const log = (line: string): void => void process.stderr.write(`kvroute events relay: ${line}\n`);

  const relay = EventRelay.start({ server: source.server, fleet: source.fleet, engines, maxAgeMs, maxBytes, log });
  let setupError: Error | undefined;
  const stopped = new AbortController();
  relay.ready.catch((error: unknown) => {
    setupError = error as Error;
    stopped.abort();
  });
  const timer =
    statsMs === 0
      ? undefined
      : setInterval(() => {
          const s = relay.stats();
          const published = s.engines.reduce((n, e) => n + e.published, 0);
          const resets = s.engines.reduce((n, e) => n + e.resets, 0);
          log(
            `${published} messages published, ${s.acknowledged} acknowledged, ${s.failed} failed, ${s.pending} in flight, ${resets} reset markers${s.connected ? '' : ' · NATS down'}`,
          );
        }, statsMs);
  await untilStopped(stopped.signal);
  clearInterval(timer);
  await relay.close();
  if (setupError !== undefined) throw new UsageError(`cannot set up the stream: ${setupError.message}`);
  log('stopped');
}
