/**
 * One NATS connection per server for every event-plane subscription of a process: a replica with
 * a thousand engines opens one connection, not a thousand. Counted: the last release closes it.
 *
 * Hazard: acquire() waits for NATS as long as it is unreachable; a release() before it resolved
 * gives the connection back as soon as it arrives (and closes it when nobody else holds it).
 */
import type { NatsConnection } from '@nats-io/transport-node';

import { closeNats, connectForever } from './nats-connect.js';

interface Shared {
  holders: number;
  connection: Promise<NatsConnection | undefined>;
  closed: boolean;
}

const shared = new Map<string, Shared>();

/** The process's connection to `server` (connected, or waiting to be). */
export function acquireNats(server: string, onDown: (message: string) => void): Promise<NatsConnection | undefined> {
  let entry = shared.get(server);
  if (entry === undefined) {
    const created: Shared = { holders: 0, closed: false, connection: Promise.resolve(undefined) };
    created.connection = connectForever({
      server,
      name: `kvroute-events-${process.pid}`,
      onDown,
      isClosed: () => created.closed,
    });
    entry = created;
    shared.set(server, entry);
  }
  entry.holders++;
  return entry.connection;
}

/** Gives a connection back; the last holder's release closes it. */
export async function releaseNats(server: string): Promise<void> {
  const entry = shared.get(server);
  if (entry === undefined) return;
  entry.holders--;
  if (entry.holders > 0) return;
  entry.closed = true;
  shared.delete(server);
  const nc = await entry.connection;
  if (nc !== undefined) await closeNats(nc);
}
