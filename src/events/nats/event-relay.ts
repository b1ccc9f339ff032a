/**
 * `kvroute events relay`: engines' KV events from their ZeroMQ sockets into the fleet's JetStream
 * stream (docs/scale-out.md, "One event plane over NATS"), so replicas read one stream instead of
 * every engine's socket, and a replica that starts reads what the stream retained.
 *
 * The relay creates the stream `KVROUTE_<FLEET>_EVENTS` (subjects `kvroute.<fleet>.events.>`,
 * file storage, oldest messages discarded past `maxAgeMs` or `maxBytes`) or updates those limits
 * on an existing one, then the fleet's ready marker (stream-ready.ts: old nats-servers crash when
 * a stream is read mid-creation, so replicas wait for it there), then starts one EngineRelay per engine from the last seq the stream holds
 * for it. NATS down at start: it waits (saying so) and starts when NATS answers. NATS lost later:
 * the client reconnects; what it could not publish meanwhile becomes a reset marker, and the
 * stream is re-created if the server came back without it.
 *
 * Hazard: one relay per engine. Two relays publishing one engine's subject interleave two copies;
 * the replicas would skip the second as stale, but their resets would not agree.
 */
import {
  jetstream,
  jetstreamManager,
  DiscardPolicy,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
} from '@nats-io/jetstream';
import { nanos, type NatsConnection } from '@nats-io/transport-node';

import { EngineRelay, type EngineRelayStats } from './engine-relay.js';
import { eventStreamName, eventSubject, eventSubjects, SEQ_HEADER } from './event-subjects.js';
import { JetStreamPublisher } from './jetstream-publisher.js';
import { closeNats, connectForever } from './nats-connect.js';
import { fleetStreamNames, readyStreamName, readySubject, streamCreateRaceAffected } from './stream-ready.js';

export interface RelayedEngine {
  /** The engine's backend URL, as the replicas' `backends` name it. */
  engine: string;
  /** Its ZeroMQ KV event endpoint, and replay endpoint if it has one. */
  endpoint: string;
  replay?: string | undefined;
}

export interface EventRelayOptions {
  server: string;
  fleet: string;
  engines: readonly RelayedEngine[];
  /** The stream keeps messages this long, ms. */
  maxAgeMs: number;
  /** And at most this many bytes (the oldest go first). */
  maxBytes: number;
  log(line: string): void;
  /** Unacknowledged publishes allowed in flight (JetStreamPublisher). */
  window?: number;
}

export interface EventRelayStats {
  connected: boolean;
  stream: string;
  acknowledged: number;
  failed: number;
  pending: number;
  engines: EngineRelayStats[];
}

/** How long a JetStream admin call may take, ms. */
const JETSTREAM_API_TIMEOUT_MS = 10_000;
/** Attempts of one setup call that times out before the relay gives up. */
const SETUP_ATTEMPTS = 5;
/** How long a relay waits for another's creation of the stream to finish (its ready marker), ms. */
const READY_WAIT_MS = 5_000;

export class EventRelay {
  private nc: NatsConnection | undefined;
  private publisher: JetStreamPublisher | undefined;
  private readonly relays = new Map<string, EngineRelay>();
  private closed = false;
  private connected = false;

  /**
   * Resolves once every engine is being relayed; rejects when the stream cannot be set up (e.g.
   * another stream already claims the subjects). Never settles while NATS stays unreachable.
   */
  readonly ready: Promise<void>;

  private constructor(readonly options: EventRelayOptions) {
    this.ready = this.run();
  }

  /** Starts at once: connects (waiting for NATS as long as it takes, or until close()), sets up the stream, relays. */
  static start(options: EventRelayOptions): EventRelay {
    return new EventRelay(options);
  }

  get stream(): string {
    return eventStreamName(this.options.fleet);
  }

  private async run(): Promise<void> {
    const { options } = this;
    const nc = await connectForever({
      server: options.server,
      name: `kvroute-relay-${options.fleet}`,
      onDown: (message) => options.log(`warning: relay: ${message}`),
      isClosed: () => this.closed,
    });
    if (nc === undefined) return;
    this.nc = nc;
    this.connected = true;
    // JetStream's admin calls wait longer than the connection's 2 s: a busy server creating a
    // file-backed stream can take that long, which is no reason to give up.
    const jsm = await jetstreamManager(nc, { timeout: JETSTREAM_API_TIMEOUT_MS });
    await this.timeoutRetried('set up the stream', () => this.ensureStream(jsm));
    const publisher = new JetStreamPublisher(jetstream(nc), {
      ...(options.window === undefined ? {} : { window: options.window }),
      onFailed: (subject, error) => this.publishFailed(subject, error),
    });
    this.publisher = publisher;
    for (const e of options.engines) {
      if (this.closed) return;
      const subject = eventSubject(options.fleet, e.engine);
      const last = await this.timeoutRetried(`read ${subject}'s last message`, () =>
        jsm.streams.getMessage(this.stream, { last_by_subj: subject }),
      );
      const seqText = last?.header?.get(SEQ_HEADER) ?? '';
      const relay = new EngineRelay({
        engine: e.engine,
        subject,
        endpoint: e.endpoint,
        replay: e.replay,
        lastPublished: /^\d+$/.test(seqText) ? BigInt(seqText) : -1n,
        lastPayload: last?.data,
        publisher,
        log: options.log,
      });
      this.relays.set(subject, relay);
      if (this.closed) return;
      await relay.start();
    }
    options.log(
      `relay: ${options.engines.length} engine(s) into stream ${this.stream} on ${nc.getServer()} (subjects ${eventSubjects(options.fleet)})`,
    );
    void this.watch(nc, jsm);
  }

  /**
   * Runs a JetStream admin call, again after a timeout (NATS slow to answer), at most
   * SETUP_ATTEMPTS times; any other error, or the last timeout, is thrown.
   */
  private async timeoutRetried<T>(what: string, call: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (error) {
        const timedOut = (error as Error).name === 'TimeoutError' || /timeout/i.test((error as Error).message);
        if (!timedOut || attempt >= SETUP_ATTEMPTS || this.closed) throw error;
        this.options.log(
          `warning: relay: NATS did not answer in time to ${what}; asking again (${attempt}/${SETUP_ATTEMPTS})`,
        );
      }
    }
  }

  /**
   * Creates the stream, or brings an existing one's limits to the configured ones; then the
   * fleet's ready marker (stream-ready.ts). Against a nats-server that crashes on a stream read
   * while it is created, an event stream listed without its marker is another relay's creation
   * in progress (or a relay from before the marker): it is read only after READY_WAIT_MS.
   */
  private async ensureStream(jsm: JetStreamManager): Promise<void> {
    const { fleet, maxAgeMs, maxBytes } = this.options;
    const wanted = {
      name: this.stream,
      subjects: [eventSubjects(fleet)],
      storage: StorageType.File,
      retention: RetentionPolicy.Limits,
      discard: DiscardPolicy.Old,
      max_age: nanos(maxAgeMs),
      max_bytes: maxBytes,
    };
    let names = await fleetStreamNames(jsm, fleet);
    if (!names.has(this.stream)) {
      await jsm.streams.add(wanted);
      this.options.log(`relay: created stream ${this.stream} (max age ${maxAgeMs} ms, max bytes ${maxBytes})`);
    } else {
      const marker = readyStreamName(fleet);
      for (let waited = 0; !names.has(marker) && this.raceAffected() && waited < READY_WAIT_MS; waited += 250) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        names = await fleetStreamNames(jsm, fleet);
      }
      const info = await jsm.streams.info(this.stream);
      if (info.config.max_age !== wanted.max_age || info.config.max_bytes !== maxBytes) {
        await jsm.streams.update(this.stream, { ...info.config, max_age: wanted.max_age, max_bytes: maxBytes });
        this.options.log(`relay: stream ${this.stream} limits set to max age ${maxAgeMs} ms, max bytes ${maxBytes}`);
      }
    }
    // Empty, and never published to (an existing one with this configuration is left as it is).
    if (!names.has(readyStreamName(fleet)))
      await jsm.streams.add({
        name: readyStreamName(fleet),
        subjects: [readySubject(fleet)],
        storage: StorageType.File,
        retention: RetentionPolicy.Limits,
        discard: DiscardPolicy.Old,
        max_msgs: 1,
      });
  }

  private raceAffected(): boolean {
    return streamCreateRaceAffected(this.nc?.info?.version);
  }

  private async watch(nc: NatsConnection, jsm: JetStreamManager): Promise<void> {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect') {
        this.connected = false;
        this.options.log(
          `warning: relay: lost NATS ${String(s.server)}; reconnecting (unacknowledged events become reset markers)`,
        );
      } else if (s.type === 'reconnect') {
        this.connected = true;
        this.options.log(`relay: reconnected to NATS ${String(s.server)}`);
        await this.ensureStream(jsm).catch((error: unknown) =>
          this.options.log(`warning: relay: cannot set up stream ${this.stream}: ${(error as Error).message}`),
        );
      }
    }
  }

  private publishFailed(subject: string, error: Error): void {
    const relay = this.relays.get(subject);
    if (relay === undefined || this.closed) return;
    relay.publishFailed();
    // The first failure and every thousandth: NATS down fails every publish in flight.
    if (this.publisher!.failed % 1000 === 1)
      this.options.log(`warning: relay: publish to ${subject} failed (${error.message}); a reset marker follows`);
  }

  stats(): EventRelayStats {
    return {
      connected: this.connected,
      stream: this.stream,
      acknowledged: this.publisher?.acknowledged ?? 0,
      failed: this.publisher?.failed ?? 0,
      pending: this.publisher?.pending ?? 0,
      engines: [...this.relays.values()].map((r) => r.stats()),
    };
  }

  /** Stops receiving, waits (bounded) for the acknowledgements in flight, leaves NATS. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all([...this.relays.values()].map((r) => r.close()));
    if (this.publisher !== undefined)
      await Promise.race([this.publisher.drain(), new Promise((r) => setTimeout(r, 3000).unref())]);
    if (this.nc !== undefined) await closeNats(this.nc);
  }
}
