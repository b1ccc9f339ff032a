/**
 * A backend as the proxy's options name it (createProxy's `backends`, serve's YAML `backends`),
 * checked and normalised: its URL keyed one way (the router's instance id), its pinned models,
 * its KV event endpoints. Shared by the options (proxy-options.ts) and the fleet view
 * (proxy-state.ts), which adds and replaces backends at run time; it imports neither, so the two
 * never import each other.
 */
import { parseZmqEndpoint, ZMQ_ENDPOINT_EXPECTED } from '../../events/zmq-endpoint.js';
import {
  isNatsEventSource,
  NATS_EVENT_SOURCE_EXPECTED,
  parseNatsEventSource,
} from '../../events/nats/nats-event-source.js';

/**
 * A backend: its base URL, and optionally the models it serves. Without `models` they are
 * discovered from its `GET /v1/models` (at start, periodically, and when it recovers); with
 * them, discovery is off for that backend.
 */
export interface BackendSpec {
  url: string;
  models?: readonly string[];
  /**
   * The engine's KV cache event endpoint (vLLM `--kv-events-config` `endpoint`, e.g.
   * tcp://10.0.0.5:5557): its cache index is then fed by the engine's events (docs/kv-events.md).
   * Or `nats://HOST:PORT[/FLEET]`: the engine's events as `kvroute events relay` puts them in the
   * fleet's JetStream stream (docs/scale-out.md, "One event plane over NATS"). YAML: `kv_events`.
   */
  kvEvents?: string;
  /** The engine's replay endpoint (vLLM `replay_endpoint`), asked for missed events. YAML: `replay`. */
  kvReplay?: string;
}

/**
 * A backend's KV event endpoints, checked: its event source (ZeroMQ or NATS) and, beside a ZeroMQ
 * one only, its replay endpoint. Discovery's templates have this shape too.
 */
export interface KvEventEndpoints {
  kvEvents?: string | undefined;
  kvReplay?: string | undefined;
}

/** A backend with its URL normalised (the router's instance id) and its pinned models, if any. */
export interface ResolvedBackend extends KvEventEndpoints {
  id: string;
  models: readonly string[] | undefined;
}

/** A bad option of createProxy(): names the field. */
export class ProxyOptionError extends RangeError {
  readonly code = 'ERR_KVROUTE_INVALID_ARG_VALUE';
}

/**
 * A backend entry: a URL string, or { url, models, kvEvents, kvReplay } (the options API), or
 * { url, models, kv_events, replay } (YAML: `yaml` true).
 */
export function resolveBackend(entry: unknown, field: string, yaml = false): ResolvedBackend {
  if (typeof entry === 'string') return { id: normaliseBackend(entry, field), models: undefined };
  const [eventsKey, replayKey] = yaml ? ['kv_events', 'replay'] : ['kvEvents', 'kvReplay'];
  const keys = ['url', 'models', eventsKey, replayKey];
  if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
    throw new ProxyOptionError(`${field} must be a URL or {${keys.join(', ')}}, got ${JSON.stringify(entry)}`);
  const { url, models, [eventsKey]: kvEvents, [replayKey]: kvReplay, ...rest } = entry as Record<string, unknown>;
  const unknownKey = Object.keys(rest)[0];
  if (unknownKey !== undefined)
    throw new ProxyOptionError(`${field} has an unknown key "${unknownKey}"; known: ${keys.join(', ')}`);
  const resolved: ResolvedBackend = { id: normaliseBackend(url, `${field}.url`), models: undefined };
  if (models !== undefined) {
    if (!Array.isArray(models) || models.some((m) => typeof m !== 'string' || m === ''))
      throw new ProxyOptionError(`${field}.models must be a list of model names, got ${JSON.stringify(models)}`);
    resolved.models = [...new Set(models as string[])];
  }
  if (kvEvents !== undefined && kvEvents !== null) resolved.kvEvents = kvEventSource(kvEvents, `${field}.${eventsKey}`);
  if (kvReplay !== undefined && kvReplay !== null) {
    checkReplayBeside(resolved.kvEvents, { events: `${field}.${eventsKey}`, replay: `${field}.${replayKey}` });
    resolved.kvReplay = zmqEndpoint(kvReplay, `${field}.${replayKey}`);
  }
  return resolved;
}

/**
 * Refuses a replay endpoint beside `events` (the checked event source; undefined when there is
 * none): one needs a ZeroMQ stream to replay. `fields` names the two as the caller calls them.
 */
export function checkReplayBeside(events: string | undefined, fields: { events: string; replay: string }): void {
  if (events === undefined)
    throw new ProxyOptionError(`${fields.replay} needs ${fields.events}: a replay endpoint serves a KV event stream`);
  if (isNatsEventSource(events))
    throw new ProxyOptionError(
      `${fields.replay} needs a ZeroMQ ${fields.events}: over NATS the stream itself is the replay`,
    );
}

/**
 * Where a backend's KV events come from: a ZeroMQ endpoint, or a NATS event source kept as
 * written (its fleet, when absent, is the default one: see parseNatsEventSource).
 */
export function kvEventSource(raw: unknown, field: string): string {
  if (typeof raw === 'string' && isNatsEventSource(raw)) {
    if (parseNatsEventSource(raw, 'default') === undefined)
      throw new ProxyOptionError(`${field} must be ${NATS_EVENT_SOURCE_EXPECTED}, got ${JSON.stringify(raw)}`);
    return raw.trim();
  }
  const endpoint = parseZmqEndpoint(raw);
  if (endpoint === undefined)
    throw new ProxyOptionError(
      `${field} must be ${ZMQ_ENDPOINT_EXPECTED}, or ${NATS_EVENT_SOURCE_EXPECTED}, got ${JSON.stringify(raw)}`,
    );
  return endpoint;
}

/** A ZeroMQ endpoint to connect to (events/zmq-endpoint.ts), or a ProxyOptionError naming `field`. */
export function zmqEndpoint(raw: unknown, field: string): string {
  const endpoint = parseZmqEndpoint(raw);
  if (endpoint === undefined)
    throw new ProxyOptionError(`${field} must be ${ZMQ_ENDPOINT_EXPECTED}, got ${JSON.stringify(raw)}`);
  return endpoint;
}

/**
 * A backend URL as the proxy keys it: `http(s)://host:port[/prefix]`, no trailing slash, no
 * query, no credentials. This string is the router's instance id and the `x-kvroute-instance`
 * header, so one spelling per backend matters.
 */
export function normaliseBackend(raw: unknown, field: string): string {
  if (typeof raw !== 'string' || !URL.canParse(raw))
    throw new ProxyOptionError(`${field} must be an http:// or https:// URL, got ${JSON.stringify(raw)}`);
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new ProxyOptionError(`${field} must be an http:// or https:// URL, got ${JSON.stringify(raw)}`);
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '')
    throw new ProxyOptionError(`${field} must not carry credentials, a query or a fragment: ${JSON.stringify(raw)}`);
  return url.origin + url.pathname.replace(/\/+$/, '');
}
