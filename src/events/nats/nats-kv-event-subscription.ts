/**
 * subscribeNatsKvEvents: one router instance fed by its engine's KV events from the fleet's
 * JetStream stream (docs/scale-out.md, "One event plane over NATS"), which `kvroute events relay`
 * fills. The replica's counterpart of subscribeKvEvents (kv-event-subscription.ts): the same sink,
 * the same packer, another transport.
 *
 * An ordered consumer on the engine's subject delivers everything the stream retained, then what
 * arrives: a replica that starts is warm once it has read the retained messages, not after its
 * engines have re-sent their cache. Until then (`replaying`) the instance routes on its belief
 * index; from the message that reaches the stream's last one for the subject on, it is fed.
 *
 * Per message, by the engine's seq in the Kvroute-Seq header:
 * - a reset marker (Kvroute-Reset): the index is emptied, and the next message starts it again;
 * - the next seq: applied; at or below the last applied: skipped (a relay that restarted and
 *   re-published what it had); seq 0 after later ones: the engine restarted, the index is emptied;
 * - a jump: the relay guarantees none without a reset marker before it, so one is a stream that
 *   was truncated mid-engine (retention) or a foreign publisher: the index is emptied and rebuilt.
 *   The first message a consumer reads may start anywhere (what retention kept): it is applied.
 * Malformed payloads are counted and skipped alone, as on ZeroMQ.
 *
 * NATS: unreachable at start, the instance waits on its belief index (a warning says so); lost
 * later, it routes on the belief index until the client reconnects, and the ordered consumer
 * resumes where it was (JetStream kept what was published meanwhile: nothing is lost, nothing
 * re-applied). No stream yet (no relay ever ran): a warning, and a retry every second. Against a
 * nats-server older than 2.9.15 the stream is read only once the relay's ready marker is listed
 * (stream-ready.ts: such a server exits when a stream is read while it is created).
 */
import type { ConsumerMessages, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import type { NatsConnection } from '@nats-io/transport-node';

import type { KvEventSink, KvEventSinkOwner } from '../../core/kv-event-sink.js';
import type { Router } from '../../core/router.js';
import type { KvEventInstanceStats } from '../../core/types.js';
import { KvEventFormatError } from '../kv-event-batch.js';
import { KvEventSeq } from '../kv-event-seq.js';
import type { KvEventSubscription } from '../kv-event-subscription.js';
import { KvEventPacker } from '../packed-kv-events.js';
import { TurnBatch } from '../turn-batch.js';
import { eventStreamName, eventSubject, RESET_HEADER, SEQ_HEADER } from './event-subjects.js';
import type { NatsEventSource } from './nats-event-source.js';
import { acquireNats, releaseNats } from './shared-nats.js';
import { fleetStreamNames, readyStreamName, streamCreateRaceAffected } from './stream-ready.js';

const RETRY_MS = 1000;

/**
 * Feeds `instance` of `router` from the stream of `source`, on the subject of `engine` (the
 * engine's backend URL; default the instance id, which serve makes the backend URL). Starts at
 * once, returns at once; router.removeInstance() and router.close() close it.
 */
export function subscribeNatsKvEvents(
  router: Router,
  instance: string,
  source: NatsEventSource,
  engine: string = instance,
): KvEventSubscription {
  const subscription = new NatsKvEventSubscription(source, engine);
  subscription.start(router.kvEventSink(instance, subscription));
  return subscription;
}

/** One packer for every subscription: apply() is synchronous, so they never share it at once. */
const packer = new KvEventPacker();

type State = 'connecting' | 'replaying' | 'live' | 'down';

class NatsKvEventSubscription implements KvEventSinkOwner, KvEventSubscription {
  private sink: KvEventSink | undefined;
  private readonly seq = new KvEventSeq();
  private readonly subject: string;
  private readonly stream: string;
  /** True at the start and after a reset marker: the next message starts the index, whatever its seq. */
  private fresh = true;
  private state: State = 'connecting';
  private caughtUp = false;
  private connected = false;
  /** The stream seq of the subject's last retained message when the consumer started. */
  private target = 0;
  private readonly startedAt = Date.now();
  /** ms from start until the retained messages were applied; undefined until then. */
  warmMs: number | undefined;
  /** Payloads of this event-loop turn, applied in one addon call when it ends. */
  private readonly pending = new TurnBatch<Uint8Array>((payloads) => this.apply(payloads));
  private closed = false;
  private messages: ConsumerMessages | undefined;
  private warnedNoStream = false;
  private lastError: string | null = null;
  private readonly counts = {
    messages: 0,
    malformed: 0,
    unknownEvents: 0,
    gaps: 0,
    missing: 0,
    restarts: 0,
    rebuilds: 0,
    disconnects: 0,
  };

  constructor(
    private readonly source: NatsEventSource,
    private readonly engine: string,
  ) {
    this.subject = eventSubject(source.fleet, engine);
    this.stream = eventStreamName(source.fleet);
  }

  start(sink: KvEventSink): void {
    this.sink = sink;
    sink.setFed(false);
    this.run().catch((error: unknown) => {
      if (!this.closed) this.warn(`stopped: ${(error as Error).message}`);
    });
  }

  private warn(message: string): void {
    this.sink?.warn(`kv events ${this.source.server} ${this.subject}: ${message}`);
  }

  private async run(): Promise<void> {
    const nc = await acquireNats(this.source.server, (message) =>
      this.warn(`${message}; routing on the belief index until it answers`),
    );
    if (nc === undefined || this.closed) return;
    this.connected = true;
    void this.watch(nc);
    const { DeliverPolicy, jetstream, jetstreamManager } = await import('@nats-io/jetstream');
    // Until the consumer runs: the stream may not exist yet (no relay ever ran), or NATS may
    // drop between the calls; each failure is retried a second later.
    while (!this.closed) {
      try {
        // Longer than the connection's 2 s: a busy JetStream answers slowly (the loop retries anyway).
        const jsm = await jetstreamManager(nc, { timeout: 10_000 });
        await this.untilStreamCreated(jsm, nc.info?.version);
        const last = await jsm.streams.getMessage(this.stream, { last_by_subj: this.subject });
        this.target = last?.seq ?? 0;
        const consumer = await jetstream(nc).consumers.get(this.stream, {
          filter_subjects: this.subject,
          deliver_policy: DeliverPolicy.All,
        });
        if (this.closed) return;
        this.updateFed();
        if (this.target === 0) this.markCaughtUp();
        this.messages = await consumer.consume({ callback: (m) => this.take(m), max_messages: 1024 });
        if (this.closed) this.messages.stop();
        return;
      } catch (error) {
        if (!this.warnedNoStream)
          this.warn(
            `cannot read stream ${this.stream} (${(error as Error).message}); is \`kvroute events relay\` running? Retrying every second`,
          );
        this.warnedNoStream = true;
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref());
      }
    }
  }

  /**
   * Throws while the relay may still be creating the stream, on a nats-server that crashes on a
   * read of a stream mid-creation (stream-ready.ts): there the stream is read once its ready
   * marker is listed. Newer servers: returns at once.
   */
  private async untilStreamCreated(jsm: JetStreamManager, version: string | undefined): Promise<void> {
    if (!streamCreateRaceAffected(version)) return;
    const names = await fleetStreamNames(jsm, this.source.fleet);
    if (!names.has(readyStreamName(this.source.fleet)))
      throw new Error(
        names.has(this.stream)
          ? `its relay has not marked it created (${readyStreamName(this.source.fleet)}): nats-server ${version ?? '(unknown version)'} exits when a stream is read while it is created (fixed in 2.9.15)`
          : 'stream not found',
      );
  }

  private async watch(nc: NatsConnection): Promise<void> {
    for await (const s of nc.status()) {
      if (this.closed) return;
      if (s.type === 'disconnect') {
        this.connected = false;
        this.counts.disconnects++;
        this.warn('lost NATS; routing on the belief index until it returns');
      } else if (s.type === 'reconnect') {
        this.connected = true;
        this.warn('reconnected to NATS; the consumer resumes where it was');
      }
      this.updateFed();
    }
  }

  /** One delivered message (exposed for tests of the seq rules). */
  take(m: Pick<JsMsg, 'headers' | 'data' | 'seq'>): void {
    if (this.closed) return;
    this.counts.messages++;
    const reset = m.headers?.get(RESET_HEADER) ?? '';
    if (reset !== '') {
      this.flush();
      this.sink!.clear();
      this.seq.forget();
      this.fresh = true;
      if (reset === 'engine-restart') this.counts.restarts++;
      else this.counts.rebuilds++;
    } else this.takeEvents(m.headers?.get(SEQ_HEADER) ?? '', m.data);
    if (!this.caughtUp && m.seq >= this.target) this.markCaughtUp();
  }

  private takeEvents(seqText: string, payload: Uint8Array): void {
    if (!/^\d{1,19}$/.test(seqText)) {
      this.counts.malformed++;
      this.lastError = `${SEQ_HEADER} must be the engine's seq (a decimal integer), got ${JSON.stringify(seqText)}`;
      return;
    }
    const verdict = this.seq.observe(BigInt(seqText));
    if (verdict.kind === 'stale') return;
    if (verdict.kind === 'restart' && !this.fresh) {
      this.flush();
      this.sink!.clear();
      this.counts.restarts++;
    } else if (verdict.kind === 'gap' && !this.fresh) {
      this.flush();
      this.sink!.clear();
      this.counts.gaps++;
      this.counts.missing += Number(verdict.to - verdict.from);
      this.counts.rebuilds++;
    }
    this.fresh = false;
    this.pending.push(payload);
  }

  private flush(): void {
    this.pending.flush();
  }

  /** Applies one turn's payloads in one addon call; a malformed payload is skipped alone. */
  private apply(payloads: readonly Uint8Array[]): void {
    if (this.closed) return;
    packer.reset();
    for (const payload of payloads) {
      try {
        this.counts.unknownEvents += packer.addPayload(payload).unknownEvents;
      } catch (error) {
        if (!(error instanceof KvEventFormatError)) throw error;
        this.counts.malformed++;
        this.lastError = error.message;
      }
    }
    if (packer.events > 0) this.sink!.apply(packer);
  }

  private markCaughtUp(): void {
    this.caughtUp = true;
    this.warmMs = Date.now() - this.startedAt;
    this.updateFed();
  }

  private updateFed(): void {
    const fed = this.connected && this.caughtUp && !this.closed;
    this.state = fed ? 'live' : !this.caughtUp ? (this.connected ? 'replaying' : 'connecting') : 'down';
    if (this.sink !== undefined && this.sink.fed !== fed) this.sink.setFed(fed);
  }

  stats(): KvEventInstanceStats {
    const index = this.sink!.indexStats();
    return {
      endpoint: `${this.source.server}/${this.subject}`,
      replay: null,
      state: this.state,
      ...index,
      messages: this.counts.messages,
      malformed: this.counts.malformed,
      unknownEvents: this.counts.unknownEvents,
      gaps: this.counts.gaps,
      missing: this.counts.missing,
      stale: this.seq.counts.stale,
      restarts: this.counts.restarts,
      replays: 0,
      replayFailures: 0,
      rebuilds: this.counts.rebuilds,
      disconnects: this.counts.disconnects,
      lastError: this.lastError,
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.pending.clear();
    this.sink?.setFed(false);
    this.messages?.stop();
    await releaseNats(this.source.server);
  }
}
