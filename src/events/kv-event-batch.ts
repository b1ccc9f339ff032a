/**
 * vLLM's KV cache events, decoded (docs/kv-events.md).
 *
 * A ZMQ PUB message is three frames: topic, `seq` (8 bytes, big-endian), and a msgpack
 * `KVEventBatch(ts, events, data_parallel_rank)`. The events are `BlockStored(block_hashes,
 * parent_block_hash, token_ids, block_size, lora_id, medium)`, `BlockRemoved(block_hashes,
 * medium)` and `AllBlocksCleared()`. vLLM encoded them as positional arrays whose first element
 * is the type name until 2026, and as maps with a `type` key since; a batch may be either too.
 * Both are decoded to one shape here.
 *
 * Hashes are u64: msgpack carries small ones as plain integers and large ones as uint64, and an
 * engine that hashes to signed int64 sends negative values; every one becomes its unsigned 64-bit
 * bigint (`BigInt.asUintN(64, …)`), so the same block has the same key however it was encoded.
 *
 * Every check names the field: a malformed frame throws KvEventFormatError, which the subscriber
 * counts and skips (one bad frame never stops the stream). Unknown event types are skipped and
 * counted, not refused, so a newer vLLM's additions do not break ingestion.
 */
import { Unpackr } from 'msgpackr';

import type { KvrouteError } from '../core/errors.js';

export type KvEvent =
  | {
      type: 'stored';
      blockHashes: bigint[];
      /** null for a block chain that starts at the root. */
      parentBlockHash: bigint | null;
      tokenIds: number[];
      blockSize: number;
      loraId: number | null;
      /** Where the blocks live: "GPU" (or null, from older engines) is the prefix cache; others are offload tiers. */
      medium: string | null;
    }
  | { type: 'removed'; blockHashes: bigint[]; medium: string | null }
  | { type: 'cleared' };

export interface KvEventBatch {
  /** The engine's timestamp, seconds. */
  ts: number;
  events: KvEvent[];
  /** Event types this decoder does not know (skipped). */
  unknownEvents: number;
  dataParallelRank: number | null;
}

export interface KvEventMessage {
  topic: string;
  /** Per publisher, from 0; a bigint because the wire carries 64 bits. */
  seq: bigint;
  batch: KvEventBatch;
}

/** A frame or payload that is not a KV event message. */
export class KvEventFormatError extends Error implements KvrouteError {
  readonly code = 'ERR_KVROUTE_KV_EVENT' as const;
}

// Integers past 2^53 come back as bigints, so no hash is rounded.
const unpackr = new Unpackr({ int64AsType: 'bigint', mapsAsObjects: true, useRecords: false });

/** Throws the KvEventFormatError every check here throws: `field: must be expected, got …`. */
export function fail(field: string, expected: string, got: unknown): never {
  const shown = typeof got === 'bigint' ? `${got}n` : (JSON.stringify(got) ?? String(got));
  throw new KvEventFormatError(
    `${field}: must be ${expected}, got ${shown.length > 60 ? `${shown.slice(0, 57)}...` : shown}`,
  );
}

/** A block hash as its unsigned 64-bit value. */
export function hash(value: unknown, field: string): bigint {
  if (typeof value === 'bigint') return BigInt.asUintN(64, value);
  if (typeof value === 'number' && Number.isSafeInteger(value)) return BigInt.asUintN(64, BigInt(value));
  return fail(field, 'an integer block hash', value);
}

function hashes(value: unknown, field: string): bigint[] {
  if (!Array.isArray(value)) fail(field, 'an array of block hashes', value);
  return (value as unknown[]).map((h, i) => hash(h, `${field}[${i}]`));
}

function tokens(value: unknown, field: string): number[] {
  if (!Array.isArray(value)) fail(field, 'an array of token ids', value);
  for (let i = 0; i < (value as unknown[]).length; i++) {
    const t = (value as unknown[])[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0)
      fail(`${field}[${i}]`, 'a token id (an integer ≥ 0)', t);
  }
  return value as number[];
}

export function optionalInteger(value: unknown, field: string): number | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'bigint') return Number(value);
  if (typeof value !== 'number' || !Number.isInteger(value)) fail(field, 'an integer or null', value);
  return value as number;
}

export function optionalString(value: unknown, field: string): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== 'string') fail(field, 'a string or null', value);
  return value as string;
}

/** The fields of one event, by name, from either encoding; undefined for an unknown type. */
export function eventFields(
  raw: unknown,
  field: string,
): { type: string; get: (name: string, position: number) => unknown } {
  if (Array.isArray(raw)) {
    if (typeof raw[0] !== 'string') fail(`${field}[0]`, 'the event type name', raw[0]);
    return { type: raw[0] as string, get: (_name, position) => raw[position] };
  }
  if (typeof raw === 'object' && raw !== null) {
    const map = raw as Record<string, unknown>;
    if (typeof map.type !== 'string') fail(`${field}.type`, 'the event type name', map.type);
    return { type: map.type as string, get: (name) => map[name] };
  }
  return fail(field, 'an event (an array or a map with "type")', raw);
}

function event(raw: unknown, field: string): KvEvent | undefined {
  const { type, get } = eventFields(raw, field);
  const at = (name: string) => `${field}.${name}`;
  switch (type) {
    case 'BlockStored': {
      const blockSize = get('block_size', 4);
      if (typeof blockSize !== 'number' || !Number.isInteger(blockSize) || blockSize < 1)
        fail(at('block_size'), 'an integer ≥ 1', blockSize);
      const parent = get('parent_block_hash', 2);
      const stored: KvEvent = {
        type: 'stored',
        blockHashes: hashes(get('block_hashes', 1), at('block_hashes')),
        parentBlockHash: parent === null || parent === undefined ? null : hash(parent, at('parent_block_hash')),
        tokenIds: tokens(get('token_ids', 3), at('token_ids')),
        blockSize: blockSize as number,
        loraId: optionalInteger(get('lora_id', 5), at('lora_id')),
        medium: optionalString(get('medium', 6), at('medium')),
      };
      if (stored.tokenIds.length !== stored.blockHashes.length * stored.blockSize)
        fail(
          at('token_ids'),
          `block_size × the number of block_hashes tokens (${stored.blockSize} × ${stored.blockHashes.length})`,
          `${stored.tokenIds.length} tokens`,
        );
      return stored;
    }
    case 'BlockRemoved':
      return {
        type: 'removed',
        blockHashes: hashes(get('block_hashes', 1), at('block_hashes')),
        medium: optionalString(get('medium', 2), at('medium')),
      };
    case 'AllBlocksCleared':
      return { type: 'cleared' };
    default:
      return undefined;
  }
}

/** A KVEventBatch's fields, unpacked and checked, its events still raw (one per encoding). */
export interface RawKvEventBatch {
  ts: number;
  events: unknown[];
  dataParallelRank: number | null;
}

/** Unpacks a msgpack KVEventBatch, positional or map-shaped, checking its fields but not its events. */
export function unpackKvEventBatch(payload: Uint8Array): RawKvEventBatch {
  let raw: unknown;
  try {
    raw = unpackr.unpack(payload);
  } catch (error) {
    throw new KvEventFormatError(`payload: not msgpack (${(error as Error).message})`);
  }
  let ts: unknown;
  let events: unknown;
  let rank: unknown;
  if (Array.isArray(raw)) [ts, events, rank] = raw as unknown[];
  else if (typeof raw === 'object' && raw !== null) {
    const map = raw as Record<string, unknown>;
    [ts, events, rank] = [map.ts, map.events, map.data_parallel_rank];
  } else fail('batch', 'a KVEventBatch (an array or a map)', raw);
  if (typeof ts !== 'number' || !Number.isFinite(ts)) fail('batch.ts', 'a finite number', ts);
  if (!Array.isArray(events)) fail('batch.events', 'an array', events);
  return {
    ts: ts as number,
    events: events as unknown[],
    dataParallelRank: optionalInteger(rank, 'batch.data_parallel_rank'),
  };
}

/** Decodes a msgpack KVEventBatch, positional or map-shaped. */
export function decodeKvEventBatch(payload: Uint8Array): KvEventBatch {
  const { ts, events, dataParallelRank } = unpackKvEventBatch(payload);
  const decoded: KvEvent[] = [];
  let unknownEvents = 0;
  events.forEach((e, i) => {
    const one = event(e, `batch.events[${i}]`);
    if (one === undefined) unknownEvents++;
    else decoded.push(one);
  });
  return { ts, events: decoded, unknownEvents, dataParallelRank };
}

/** Decodes one multipart message: [topic, seq (8 bytes, big-endian), payload]. */
export function decodeKvEventMessage(frames: readonly Uint8Array[]): KvEventMessage {
  if (frames.length !== 3) fail('message', 'three frames (topic, seq, payload)', `${frames.length} frames`);
  const [topic, seq, payload] = frames as [Uint8Array, Uint8Array, Uint8Array];
  if (seq.length !== 8) fail('seq', '8 bytes', `${seq.length} bytes`);
  const view = new DataView(seq.buffer, seq.byteOffset, 8);
  return {
    topic: Buffer.from(topic.buffer, topic.byteOffset, topic.length).toString('utf8'),
    seq: view.getBigInt64(0, false),
    batch: decodeKvEventBatch(payload),
  };
}
