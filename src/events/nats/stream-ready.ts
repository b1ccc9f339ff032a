/**
 * The fleet's ready marker: an empty stream `KVROUTE_<FLEET>_READY` that the relay creates only
 * after the event stream exists whole, so that nobody reads the event stream while it is being
 * created.
 *
 * Why (a nats-server bug, seen in CI): before 2.9.15, nats-server lists a new stream before its
 * store exists (stream.go adds it to the account, then sets up the store), and a request that reads
 * the store in that window (`STREAM.INFO`, `STREAM.MSG.GET`, a consumer's creation) dereferences
 * nil and the whole server exits (jetstream_api.go, jsMsgGetRequest). Debian 12 ships 2.9.10. A
 * replica that starts beside a relay creating its stream asks exactly then.
 *
 * So against such a server a replica (and a second relay) looks at the event stream only once the
 * marker is listed. Listing stream names (`STREAM.NAMES`) reads each stream's configuration, never
 * its store: it is safe in the window. Servers from 2.9.15 on create the store before listing the
 * stream; their clients skip the wait, and the relay still makes the marker (an empty stream).
 */
// Types only: a router that reads no events over NATS never loads the client (the subscription
// imports it lazily).
import type { JetStreamManager } from '@nats-io/jetstream';

/** The first nats-server release that creates a stream's store before listing it. */
export const STREAM_CREATE_RACE_FIXED = [2, 9, 15] as const;

/** The marker stream of a fleet. */
export const readyStreamName = (fleet: string): string => `KVROUTE_${fleet}_READY`;

/** Its subject: never published to; a stream needs one. */
export const readySubject = (fleet: string): string => `kvroute.${fleet}.ready`;

/** Every stream subject of a fleet: the event stream's and the marker's. */
const fleetSubjects = (fleet: string): string => `kvroute.${fleet}.>`;

/** Whether a server of this version (its INFO's `version`) may crash on a stream read mid-creation; unknown counts as yes. */
export function streamCreateRaceAffected(version: string | undefined): boolean {
  const parts = /^v?(\d+)\.(\d+)\.(\d+)/.exec(version ?? '');
  if (parts === null) return true;
  const [major, minor, patch] = [Number(parts[1]), Number(parts[2]), Number(parts[3])];
  const [fixedMajor, fixedMinor, fixedPatch] = STREAM_CREATE_RACE_FIXED;
  if (major !== fixedMajor) return major < fixedMajor;
  if (minor !== fixedMinor) return minor < fixedMinor;
  return patch < fixedPatch;
}

/** The names of the fleet's streams (the event stream, the marker), read without touching a store. */
export async function fleetStreamNames(jsm: JetStreamManager, fleet: string): Promise<Set<string>> {
  const names = new Set<string>();
  for await (const name of jsm.streams.names(fleetSubjects(fleet))) names.add(name);
  return names;
}
