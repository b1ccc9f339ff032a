/**
 * The engine-state feed in shared memory (docs/shm-layout.md), through the addon: a writer that
 * engines or a publisher use, and a reader for tools (`kvroute state watch`) and tests. The
 * router reads the same file inside the addon.
 *
 * Values cross the addon as one Float64Array in FEED_FIELDS order. Counts must be non-negative
 * integers below 2^53; the file keeps 32-bit counts for running, waiting and the decode batch.
 */
import { invalidType, invalidValue } from '../core/errors.js';
import { FEED_STATUSES, FEED_STATUS_REASONS, feedPath, feedWarning, type FeedStatus } from '../core/feed.js';
import { loadNative, type NativeFeedReader, type NativeFeedWriter } from '../core/native.js';

/** The order of the values in the addon's Float64Array. */
const FEED_FIELDS = [
  'timestampMs',
  'running',
  'waiting',
  'kvBlocksUsed',
  'kvBlocksTotal',
  'pendingPrefillTokens',
  'maxPrefillRemaining',
  'decodeBatch',
  'flags',
  'prefixCacheQueries',
  'prefixCacheHits',
] as const;

/** The counts of one engine's state, as published. */
export interface EngineCounts {
  running: number;
  waiting: number;
  kvBlocksUsed: number;
  kvBlocksTotal: number;
  pendingPrefillTokens: number;
  maxPrefillRemaining: number;
  decodeBatch: number;
  prefixCacheQueries?: number;
  prefixCacheHits?: number;
}

/** One slot as read: the counts, who published them and when. */
export interface EngineSnapshot extends Required<EngineCounts> {
  instance: string;
  /** ms since the Unix epoch. */
  timestampMs: number;
  /** The publisher could not reach the engine; the counts are its last known ones. */
  unreachable: boolean;
}

export interface PublishOptions {
  /** ms since the Unix epoch; default now. */
  timestampMs?: number;
  unreachable?: boolean;
}

export { feedPath, FEED_STATUS_REASONS, type FeedStatus };

const FLAG_UNREACHABLE = 1;
const U32_MAX = 2 ** 32 - 1;

/** The slots hold int64 nanoseconds: the largest timestamp (ms) they can (kMaxTimestampMs in js-shm-feed.cc). */
const MAX_TIMESTAMP_MS = 9_223_372_036_854;

export class StateFeedWriter {
  private native: NativeFeedWriter | undefined;
  private readonly values = new Float64Array(FEED_FIELDS.length);
  readonly path: string;

  /**
   * Opens the feed at `shm` (a name under /dev/shm, or a path) for `slots` engines. An existing
   * feed with the same slot count is joined; anything else, or `recreate`, is replaced by a new
   * file with a new generation.
   */
  constructor(shm: string, options: { slots: number; recreate?: boolean }) {
    const { slots } = options;
    if (!(Number.isInteger(slots) && slots >= 1 && slots <= 65_536))
      throw invalidValue('slots', 'an integer in [1, 65536]', slots);
    this.path = feedPath(shm);
    const { FeedWriter } = loadNative();
    this.native = new FeedWriter(this.path, slots, options.recreate === true);
  }

  get slots(): number {
    return this.writer().info()[0];
  }

  get generation(): bigint {
    return this.writer().info()[1];
  }

  /** Publishes engine `slot`'s state under the id `instance` (at most 47 UTF-8 bytes kept). */
  publish(slot: number, instance: string, counts: EngineCounts, options: PublishOptions = {}): void {
    const writer = this.writer();
    if (typeof instance !== 'string') throw invalidType('instance', 'a string', instance);
    this.values[0] = options.timestampMs ?? Number.NaN;
    if (
      options.timestampMs !== undefined &&
      !(Number.isFinite(options.timestampMs) && options.timestampMs > 0 && options.timestampMs < MAX_TIMESTAMP_MS)
    )
      throw invalidValue('timestampMs', 'a positive number of ms since the epoch, before 2262', options.timestampMs);
    for (let i = 1; i < FEED_FIELDS.length; i++) {
      const field = FEED_FIELDS[i]!;
      if (field === 'flags') {
        this.values[i] = options.unreachable === true ? FLAG_UNREACHABLE : 0;
        continue;
      }
      const value: unknown = counts[field as keyof EngineCounts] ?? (field.startsWith('prefixCache') ? 0 : undefined);
      const max = field === 'running' || field === 'waiting' || field === 'decodeBatch' ? U32_MAX : 2 ** 53 - 1;
      if (!(typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= max))
        throw invalidValue(field, `an integer in [0, ${max}]`, value);
      this.values[i] = value;
    }
    writer.publish(slot, this.values, instance);
  }

  close(): void {
    this.native?.close();
    this.native = undefined;
  }

  private writer(): NativeFeedWriter {
    if (this.native === undefined) throw invalidValue('feed', 'open', 'closed');
    return this.native;
  }
}

export class StateFeedReader {
  private native: NativeFeedReader | undefined;
  private readonly out = new Float64Array(FEED_FIELDS.length);
  private reported: FeedStatus = 'ok';
  readonly path: string;

  /**
   * Maps the feed at `shm`. A feed that is missing or malformed is not an error: reads return
   * undefined and `warn` hears of each condition once, when it starts. The file is re-checked
   * (replaced, resized, re-generated) at most every `recheckMs`.
   */
  constructor(
    shm: string,
    private readonly options: { recheckMs?: number; warn?: (message: string) => void } = {},
  ) {
    this.path = feedPath(shm);
    const { FeedReader } = loadNative();
    this.native = new FeedReader(this.path, options.recheckMs ?? 100);
    this.report();
  }

  get status(): FeedStatus {
    return FEED_STATUSES[this.reader().info()[0]] ?? 'missing';
  }

  get slots(): number {
    return this.reader().info()[1];
  }

  get generation(): bigint {
    return this.reader().info()[2];
  }

  /** Re-checks the file when due (now, with `force`); returns the status. */
  refresh(force = false): FeedStatus {
    this.reader().refresh(force);
    return this.report();
  }

  /** One consistent snapshot of `slot`, or undefined (not published, busy, or no feed). */
  read(slot: number): EngineSnapshot | undefined {
    const instance = this.reader().read(slot, this.out);
    if (instance === null) return undefined;
    const o = this.out;
    return {
      instance,
      timestampMs: o[0]!,
      running: o[1]!,
      waiting: o[2]!,
      kvBlocksUsed: o[3]!,
      kvBlocksTotal: o[4]!,
      pendingPrefillTokens: o[5]!,
      maxPrefillRemaining: o[6]!,
      decodeBatch: o[7]!,
      unreachable: (o[8]! & FLAG_UNREACHABLE) !== 0,
      prefixCacheQueries: o[9]!,
      prefixCacheHits: o[10]!,
    };
  }

  close(): void {
    this.native?.close();
    this.native = undefined;
  }

  private report(): FeedStatus {
    const status = this.status;
    if (status !== this.reported && status !== 'ok') {
      (this.options.warn ?? ((m: string) => process.emitWarning(m, { code: 'KVROUTE_STATE_FEED' })))(
        feedWarning(this.path, status),
      );
    }
    this.reported = status;
    return status;
  }

  private reader(): NativeFeedReader {
    if (this.native === undefined) throw invalidValue('feed', 'open', 'closed');
    return this.native;
  }
}
