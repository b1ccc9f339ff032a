/**
 * ClusterLink: one `kvroute serve` replica on the fleet's load plane over core NATS
 * (docs/scale-out.md, "One load plane over NATS"). Every flushMs it publishes its own changed
 * in-flight totals and the sessions it placed (own-load.ts, load-message.ts) on
 * `kvroute.<fleet>.load.<replica>`, every fullEveryMs all of them; it applies its peers' messages
 * as an overlay on its router (Router.setPeerLoad with the live peers' sum, Router.pinSession),
 * and forgets a peer not heard for ttlMs (peer-load-table.ts).
 *
 * Off the routing path: publishing reads router.stats() on a timer, applying calls the router
 * between requests; route() itself is untouched.
 *
 * Failure behaviour:
 * - NATS unreachable at start: the replica routes on its own view; the link retries every
 *   second, warns once, and /ready's `cluster.connected` and kvroute_cluster_connected say so.
 * - NATS lost mid-run: the client reconnects forever; peers' load expires by TTL meanwhile; on
 *   reconnection the replica publishes a full message at once and peers' next messages resync it.
 * - A peer killed, or cut off by a partition: its load expires after ttlMs; nothing else changes.
 * - This replica's own event loop stalled past half the TTL: the expiry round that fires late is
 *   skipped, so peers whose messages wait unread in the socket are not forgotten for our stall.
 *
 * Hazard: start() never throws for an unreachable NATS (that is a runtime condition, not a
 * configuration error); close() must be awaited to stop its timers and connection.
 */
import { connect, type NatsConnection, type Subscription } from '@nats-io/transport-node';

import type { Router } from '../core/router.js';
import type { ClusterOptions } from './cluster-options.js';
import type { ClusterCounters } from './cluster-metrics.js';
import { decodeLoadMessage, encodeLoadMessage, LoadMessageError } from './load-message.js';
import { OwnLoad } from './own-load.js';
import { PeerLoadTable } from './peer-load-table.js';

export interface ClusterLinkHooks {
  router: Router;
  /** One line of the replica's log (a warning or a state change). */
  log(line: string): void;
  /** A peer placed `session`: it is in flight elsewhere, no longer idle here (ProxyCosts.arriving). */
  onPeerPlacement?(session: string): void;
}

/** What /ready and the dashboard say of the link. */
export interface ClusterStatus {
  fleet: string;
  replica: string;
  connected: boolean;
  peers: string[];
}

const RETRY_MS = 1000;

export class ClusterLink {
  private nc: NatsConnection | undefined;
  private sub: Subscription | undefined;
  private closed = false;
  private seq = 0;
  private warnedDown = false;
  private readonly own: OwnLoad;
  private readonly table = new PeerLoadTable();
  private readonly timers: NodeJS.Timeout[] = [];
  private lastExpiryMs = Date.now();
  private retryTimer: NodeJS.Timeout | undefined;
  readonly counters: ClusterCounters = {
    connected: false,
    peers: 0,
    published: 0,
    publishedFull: 0,
    received: 0,
    invalid: 0,
    expired: 0,
    gaps: 0,
    slowConsumer: 0,
  };

  private constructor(
    readonly options: ClusterOptions,
    private readonly hooks: ClusterLinkHooks,
  ) {
    this.own = new OwnLoad(hooks.router);
  }

  /** Starts the link: connects in the background and starts the timers. */
  static start(options: ClusterOptions, hooks: ClusterLinkHooks): ClusterLink {
    const link = new ClusterLink(options, hooks);
    link.timers.push(setInterval(() => link.flush(false), options.flushMs));
    link.timers.push(setInterval(() => link.flush(true), options.fullEveryMs));
    link.timers.push(setInterval(() => link.expire(), Math.max(1, Math.floor(options.ttlMs / 4))));
    for (const t of link.timers) t.unref();
    void link.connectLoop();
    return link;
  }

  get subject(): string {
    return `kvroute.${this.options.fleet}.load.${this.options.replica}`;
  }

  /** `session`'s request of `model` was placed on `instance` by this replica. */
  placed(session: string, instance: string, model: string | undefined): void {
    this.own.placed(session, instance, model);
  }

  status(): ClusterStatus {
    return {
      fleet: this.options.fleet,
      replica: this.options.replica,
      connected: this.counters.connected,
      peers: this.table.peerIds(),
    };
  }

  /** Tells the peers this replica's final (usually empty) load, then leaves NATS. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.flush(true);
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    clearTimeout(this.retryTimer);
    const nc = this.nc;
    this.nc = undefined;
    this.counters.connected = false;
    if (nc === undefined) return;
    // Drain sends what is buffered; bounded, since a NATS that is gone never answers.
    await Promise.race([nc.drain().catch(() => nc.close()), new Promise((r) => setTimeout(r, 2000).unref())]);
    if (!nc.isClosed()) await nc.close();
  }

  private async connectLoop(): Promise<void> {
    while (!this.closed && this.nc === undefined) {
      try {
        const nc = await connect({
          servers: this.options.servers,
          name: `kvroute-${this.options.replica}`,
          maxReconnectAttempts: -1,
          reconnectTimeWait: 250,
          pingInterval: 2000,
          maxPingOut: 2,
          timeout: 2000,
        });
        if (this.closed) {
          await nc.close();
          return;
        }
        this.attach(nc);
        return;
      } catch (error) {
        if (!this.warnedDown) {
          this.hooks.log(
            `warning: cluster: cannot reach NATS ${this.options.servers.join(',')} (${(error as Error).message}); routing on this replica's own view, retrying every ${RETRY_MS / 1000} s`,
          );
          this.warnedDown = true;
        }
        await new Promise<void>((resolve) => {
          this.retryTimer = setTimeout(resolve, RETRY_MS);
        });
      }
    }
  }

  private attach(nc: NatsConnection): void {
    this.nc = nc;
    this.counters.connected = true;
    this.warnedDown = false;
    this.hooks.log(
      `cluster: replica ${this.options.replica} joined fleet ${this.options.fleet} on ${nc.getServer()} (load plane kvroute.${this.options.fleet}.load.*)`,
    );
    this.sub = nc.subscribe(`kvroute.${this.options.fleet}.load.*`, {
      callback: (error, msg) => {
        if (error === null) this.receive(msg.subject, msg.data);
      },
    });
    void this.watch(nc);
    this.flush(true);
  }

  private async watch(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') {
        this.counters.connected = false;
        this.hooks.log(
          `warning: cluster: lost NATS ${String(s.server)}; routing on this replica's own view, reconnecting`,
        );
      } else if (s.type === 'reconnect') {
        this.counters.connected = true;
        this.hooks.log(`cluster: reconnected to NATS ${String(s.server)}; resyncing`);
        this.flush(true);
      } else if (s.type === 'slowConsumer') {
        this.counters.slowConsumer += 1;
        this.hooks.log(
          `warning: cluster: slow consumer (${s.pending} messages pending); the next full messages resync`,
        );
      }
    }
  }

  private flush(full: boolean): void {
    const nc = this.nc;
    if (this.closed || nc === undefined || !this.counters.connected) return;
    const { load, placements } = this.own.next(full);
    if (!full && load.length === 0 && placements.length === 0) return;
    this.seq += 1;
    const bytes = encodeLoadMessage({
      replica: this.options.replica,
      seq: this.seq,
      full,
      sentAtMs: Date.now(),
      load,
      placements,
    });
    try {
      nc.publish(this.subject, bytes);
      if (full) this.counters.publishedFull += 1;
      else this.counters.published += 1;
    } catch (error) {
      this.hooks.log(`warning: cluster: publish failed (${(error as Error).message})`);
    }
  }

  private receive(subject: string, data: Uint8Array): void {
    if (subject === this.subject) return;
    let message;
    try {
      message = decodeLoadMessage(data);
    } catch (error) {
      if (!(error instanceof LoadMessageError)) throw error;
      this.counters.invalid += 1;
      return;
    }
    if (message.replica === this.options.replica) return;
    this.counters.received += 1;
    const gaps = this.table.gaps;
    const changed = this.table.apply(message, Date.now());
    this.counters.gaps += this.table.gaps - gaps;
    this.counters.peers = this.table.size;
    // A full message re-pushes every instance it names: one added here since (admin API) gets its load.
    if (message.full) for (const [instance] of message.load) changed.add(instance);
    this.push(changed);
    const router = this.hooks.router;
    for (const [session, instance, model] of message.placements) {
      if (!router.hasInstance(instance)) continue;
      try {
        router.pinSession(session, instance, model ?? undefined);
        this.hooks.onPeerPlacement?.(session);
      } catch {
        // A model name this router refuses: the placement is skipped, the load still counts.
      }
    }
  }

  private expire(): void {
    const now = Date.now();
    const late = now - this.lastExpiryMs - Math.floor(this.options.ttlMs / 4);
    this.lastExpiryMs = now;
    // Our own loop stalled: peers' messages may be waiting unread; judge them next round.
    if (late > this.options.ttlMs / 2) return;
    const { expired, changed } = this.table.expire(now, this.options.ttlMs);
    if (expired.length === 0) return;
    this.counters.expired += expired.length;
    this.counters.peers = this.table.size;
    this.hooks.log(`cluster: forgot ${expired.join(', ')} (not heard for ${this.options.ttlMs} ms) with their load`);
    this.push(changed);
  }

  /** Pushes the peers' sum on each changed instance this router knows into it. */
  private push(instances: Iterable<string>): void {
    const router = this.hooks.router;
    for (const instance of instances) {
      if (!router.hasInstance(instance)) continue;
      const [running, waiting, prefillTokens, activeBlocks] = this.table.sum(instance);
      const none = running === 0 && waiting === 0 && prefillTokens === 0 && activeBlocks === 0;
      router.setPeerLoad(instance, none ? null : { running, waiting, prefillTokens, activeBlocks });
    }
  }
}
