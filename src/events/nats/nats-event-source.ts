/**
 * Where a replica reads an engine's KV events when they come over NATS instead of ZeroMQ
 * (docs/scale-out.md, "One event plane over NATS"): `nats://HOST:PORT[/FLEET]`, as a backend's
 * `kv_events` or serve's fleet-wide `events`. The fleet names the stream
 * (`KVROUTE_<FLEET>_EVENTS`) a relay fills; without one it is the replica's cluster fleet, or
 * `default`. One server is named: the client learns the rest of a NATS cluster from it.
 */

/** A NATS subject token, and so a fleet name: letters, digits, `-` and `_`. */
export const FLEET_TOKEN = /^[A-Za-z0-9_-]{1,128}$/;

export interface NatsEventSource {
  /** nats://HOST:PORT */
  server: string;
  fleet: string;
}

export const NATS_EVENT_SOURCE_EXPECTED =
  'nats://HOST:PORT or nats://HOST:PORT/FLEET (FLEET: letters, digits, - and _)';

/** The source a string names, or undefined when it is not a nats:// one of that shape. */
export function parseNatsEventSource(raw: unknown, defaultFleet: string): NatsEventSource | undefined {
  if (typeof raw !== 'string' || !raw.trim().startsWith('nats://')) return undefined;
  let url: URL;
  try {
    url = new URL(raw.trim());
  } catch {
    return undefined;
  }
  if (url.hostname === '' || url.port === '' || url.search !== '' || url.hash !== '' || url.username !== '')
    return undefined;
  const fleet = url.pathname.replace(/^\//, '') || defaultFleet;
  if (!FLEET_TOKEN.test(fleet)) return undefined;
  return { server: `nats://${url.host}`, fleet };
}

/** Whether a configured kv_events value names NATS rather than a ZeroMQ endpoint. */
export const isNatsEventSource = (raw: string): boolean => raw.trim().startsWith('nats://');
