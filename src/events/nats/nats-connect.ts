/**
 * A NATS connection for the event plane that keeps trying: the first connection is retried every
 * second until it succeeds or `isClosed()` says to stop (a relay or replica must come up with NATS
 * down and join when it returns), and once connected the client reconnects forever.
 */
import type { NatsConnection } from '@nats-io/transport-node';

const RETRY_MS = 1000;

export interface ConnectForeverOptions {
  server: string;
  /** The connection's name on the server (`nats server report connections`). */
  name: string;
  /** Told once when the first attempt fails. */
  onDown(message: string): void;
  isClosed(): boolean;
}

/** The connection, or undefined when isClosed() turned true first. */
export async function connectForever(options: ConnectForeverOptions): Promise<NatsConnection | undefined> {
  // Loaded on the first connection: a router that reads no events over NATS never loads the client.
  const { connect } = await import('@nats-io/transport-node');
  let warned = false;
  while (!options.isClosed()) {
    try {
      const nc = await connect({
        servers: [options.server],
        name: options.name,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
        pingInterval: 2000,
        maxPingOut: 2,
        timeout: 2000,
      });
      if (!options.isClosed()) return nc;
      await nc.close();
      return undefined;
    } catch (error) {
      if (!warned)
        options.onDown(`cannot reach NATS ${options.server} (${(error as Error).message}); retrying every second`);
      warned = true;
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref());
    }
  }
  return undefined;
}

/** Drains then closes, bounded: a NATS that is gone never answers a drain. */
export async function closeNats(nc: NatsConnection): Promise<void> {
  await Promise.race([nc.drain().catch(() => nc.close()), new Promise((r) => setTimeout(r, 2000).unref())]);
  if (!nc.isClosed()) await nc.close();
}
