/**
 * The load plane's Prometheus series (docs/scale-out.md, "One load plane over NATS"), on the
 * registry the replica's /metrics serves. Read at scrape time from the link's own counters, so
 * the link itself never touches prom-client.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** What the link counts; the metrics read it at each scrape. */
export interface ClusterCounters {
  connected: boolean;
  peers: number;
  /** Delta messages published (changed load or placements). */
  published: number;
  /** Full messages published (every fullEveryMs, and at each (re)connection). */
  publishedFull: number;
  received: number;
  invalid: number;
  expired: number;
  gaps: number;
  slowConsumer: number;
}

export function registerClusterMetrics(registry: Registry, read: () => ClusterCounters): void {
  const registers = [registry];
  const gauge = (name: string, help: string, value: (c: ClusterCounters) => number) =>
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(value(read()));
      },
    });
  const counter = (name: string, help: string, value: (c: ClusterCounters) => number) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(value(read()));
      },
    });
  gauge(
    'kvroute_cluster_connected',
    '1 while this replica is connected to the fleet NATS; 0 while it routes on its own view.',
    (c) => (c.connected ? 1 : 0),
  );
  gauge('kvroute_cluster_peers', 'Peer replicas heard within the TTL, whose load this replica counts.', (c) => c.peers);
  new Counter({
    name: 'kvroute_cluster_messages_published_total',
    help: 'Load-plane messages this replica published: deltas (changed load or placements, at most one per flush) and full ones (the heartbeat).',
    labelNames: ['kind'] as const,
    registers,
    collect() {
      const c = read();
      this.reset();
      this.inc({ kind: 'delta' }, c.published);
      this.inc({ kind: 'full' }, c.publishedFull);
    },
  });
  counter('kvroute_cluster_messages_received_total', "Peers' load-plane messages applied.", (c) => c.received);
  counter(
    'kvroute_cluster_messages_invalid_total',
    'Load-plane messages dropped whole because they did not decode (another version, or not a kvroute message).',
    (c) => c.invalid,
  );
  counter(
    'kvroute_cluster_peers_expired_total',
    'Peers forgotten with their load after the TTL without a message.',
    (c) => c.expired,
  );
  counter(
    'kvroute_cluster_seq_gaps_total',
    "Peers' messages that did not follow their previous one (lost, or a restarted peer); the next full message repairs the load.",
    (c) => c.gaps,
  );
  counter(
    'kvroute_cluster_slow_consumer_total',
    "Times the NATS client reported this replica's subscription as a slow consumer.",
    (c) => c.slowConsumer,
  );
}
