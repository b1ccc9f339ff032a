/**
 * The event-fed index, the TypeScript twin of native/core/event-index.h (docs/kv-events.md): per slot,
 * the engine's block hash -> token block key, each held key's count of engine hashes, and the
 * event counters. Plain Maps and a per-slot walk: the oracle of the differential tests, not a hot
 * path. validatePacked() words its refusals exactly as the addon does.
 */
import {
  EVENT_STAT_FIELDS,
  PACKED_FLAG_LORA,
  PACKED_FLAG_OTHER_MEDIUM,
  PACKED_FLAG_PARENT,
  PACKED_MAX_BLOCK_SIZE,
  PACKED_OP_CLEARED,
  PACKED_OP_REMOVED,
  PACKED_OP_STORED,
  PACKED_OP_WORDS,
  type PackedKvEvents,
} from '../core-router.js';
import { rangeError } from '../errors.js';
import { tokenBlockKey } from './token-keys.js';

interface SlotEvents {
  /** engine block hash -> token block key */
  engine: Map<bigint, bigint>;
  /** token block key -> engine hashes mapped to it (> 0) */
  refs: Map<bigint, number>;
  /** Requests routed here and not finished, by ticket: their keys. */
  inFlight: Map<number, readonly bigint[]>;
  stored: number;
  removed: number;
  cleared: number;
  ignored: number;
  orphaned: number;
  unknownRemoved: number;
  fed: boolean;
}

const emptySlot = (): SlotEvents => ({
  engine: new Map(),
  refs: new Map(),
  inFlight: new Map(),
  stored: 0,
  removed: 0,
  cleared: 0,
  ignored: 0,
  orphaned: 0,
  unknownRemoved: 0,
  fed: false,
});

const word = (i: number) => `packed.ops[${i}]`;

/** "" when `p`'s records are well formed against its lengths, else why not (as the addon says it). */
export function validateRecords(p: PackedKvEvents): string {
  if (p.opsLength % PACKED_OP_WORDS !== 0) return `packed.opsLength must be a multiple of 4, got ${p.opsLength}`;
  let hashes = 0;
  let tokens = 0;
  for (let i = 0; i < p.opsLength; i += PACKED_OP_WORDS) {
    const [op, flags, count, blockSize] = [p.ops[i]!, p.ops[i + 1]!, p.ops[i + 2]!, p.ops[i + 3]!];
    if (op === PACKED_OP_STORED) {
      if ((flags & ~(PACKED_FLAG_PARENT | PACKED_FLAG_OTHER_MEDIUM | PACKED_FLAG_LORA)) !== 0)
        return `${word(i + 1)}: flags ${flags} are not valid for a BlockStored record`;
      if (blockSize < 1 || blockSize > PACKED_MAX_BLOCK_SIZE)
        return `${word(i + 3)}: block size must be in [1, 16777216], got ${blockSize}`;
      hashes += ((flags & PACKED_FLAG_PARENT) !== 0 ? 1 : 0) + count;
      tokens += count * blockSize;
    } else if (op === PACKED_OP_REMOVED) {
      if ((flags & ~PACKED_FLAG_OTHER_MEDIUM) !== 0)
        return `${word(i + 1)}: flags ${flags} are not valid for a BlockRemoved record`;
      if (blockSize !== 0) return `${word(i + 3)}: must be 0 in a BlockRemoved record, got ${blockSize}`;
      hashes += count;
    } else if (op === PACKED_OP_CLEARED) {
      for (let w = 1; w < PACKED_OP_WORDS; w += 1)
        if (p.ops[i + w] !== 0) return `${word(i + w)}: must be 0 in an AllBlocksCleared record, got ${p.ops[i + w]}`;
    } else return `${word(i)}: unknown op ${op}`;
    if (hashes > p.hashesLength)
      return `${word(i + 2)}: the records need ${hashes} hashes, hashesLength is ${p.hashesLength}`;
    if (tokens > p.tokensLength)
      return `${word(i + 2)}: the records need ${tokens} tokens, tokensLength is ${p.tokensLength}`;
  }
  if (hashes !== p.hashesLength) return `packed.hashesLength is ${p.hashesLength} but the records use ${hashes}`;
  if (tokens !== p.tokensLength) return `packed.tokensLength is ${p.tokensLength} but the records use ${tokens}`;
  return '';
}

/** Throws, as the addon does, unless `packed` is a PackedKvEvents whose lengths fit its arrays. */
function checkArrays(packed: unknown): PackedKvEvents {
  if (typeof packed !== 'object' || packed === null)
    throw Object.assign(new TypeError('packed must be an object (PackedKvEvents)'), {
      code: 'ERR_KVROUTE_INVALID_ARG_TYPE',
    });
  const p = packed as Record<string, unknown>;
  const check = (array: string, lengthField: string, type: typeof Uint32Array | typeof BigUint64Array) => {
    const a = p[array];
    if (!(a instanceof type))
      throw Object.assign(new TypeError(`packed.${array} must be a ${type.name}`), {
        code: 'ERR_KVROUTE_INVALID_ARG_TYPE',
      });
    const n = p[lengthField];
    if (typeof n !== 'number')
      throw Object.assign(new TypeError(`packed.${lengthField} must be a number`), {
        code: 'ERR_KVROUTE_INVALID_ARG_TYPE',
      });
    if (!(n >= 0 && n <= a.length && Number.isInteger(n)))
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        `packed.${lengthField} must be an integer in [0, ${array}.length = ${a.length}], got ${n}`,
      );
  };
  check('ops', 'opsLength', Uint32Array);
  check('hashes', 'hashesLength', BigUint64Array);
  check('tokens', 'tokensLength', Uint32Array);
  return packed as PackedKvEvents;
}

export class ReferenceEventIndex {
  private readonly slots: SlotEvents[] = [];
  /** ticket -> the slot remembering its request */
  private readonly inFlightSlot = new Map<number, number>();

  private at(slot: number): SlotEvents {
    this.slots[slot] ??= emptySlot();
    return this.slots[slot];
  }

  /** The slot's instance left or arrived: everything reset. */
  reset(slot: number): void {
    this.clear(slot);
    this.slots[slot] = emptySlot();
  }

  /** Empties the slot's index and forgets its in-flight requests; counters and the fed flag stay. */
  clear(slot: number): void {
    const s = this.at(slot);
    s.engine.clear();
    s.refs.clear();
    for (const ticket of s.inFlight.keys()) this.inFlightSlot.delete(ticket);
    s.inFlight.clear();
  }

  /** The request behind `ticket`, routed to event-fed `slot`, covers `ids` there until released. */
  holdInFlight(slot: number, ticket: number, ids: readonly bigint[]): void {
    if (ids.length === 0 || this.inFlightSlot.has(ticket)) return;
    this.inFlightSlot.set(ticket, slot);
    this.at(slot).inFlight.set(ticket, [...ids]);
  }

  /** Forgets `ticket`'s request, if it is remembered. */
  releaseInFlight(ticket: number): void {
    const slot = this.inFlightSlot.get(ticket);
    if (slot === undefined) return;
    this.inFlightSlot.delete(ticket);
    this.slots[slot]!.inFlight.delete(ticket);
  }

  setFed(slot: number, on: boolean): void {
    if (typeof on !== 'boolean')
      throw Object.assign(new TypeError('on must be a boolean'), { code: 'ERR_KVROUTE_INVALID_ARG_TYPE' });
    this.at(slot).fed = on;
  }

  fed(slot: number): boolean {
    return this.slots[slot]?.fed === true;
  }

  /** Checks `packed` whole, then applies its records in order (nothing on a refusal). */
  apply(slot: number, packed: unknown): void {
    const p = checkArrays(packed);
    const error = validateRecords(p);
    if (error !== '') throw rangeError('ERR_KVROUTE_INVALID_ARG_VALUE', error);
    const s = this.at(slot);
    let h = 0;
    let t = 0;
    for (let i = 0; i < p.opsLength; i += PACKED_OP_WORDS) {
      const [op, flags, count, blockSize] = [p.ops[i]!, p.ops[i + 1]!, p.ops[i + 2]!, p.ops[i + 3]!];
      if (op === PACKED_OP_STORED) {
        const parent = (flags & PACKED_FLAG_PARENT) !== 0 ? 1 : 0;
        this.stored(s, flags, count, blockSize, p, h, t);
        h += parent + count;
        t += count * blockSize;
      } else if (op === PACKED_OP_REMOVED) {
        this.removed(s, flags, count, p, h);
        h += count;
      } else {
        this.clear(slot);
        s.cleared += 1;
      }
    }
  }

  private stored(
    s: SlotEvents,
    flags: number,
    count: number,
    blockSize: number,
    p: PackedKvEvents,
    h: number,
    t: number,
  ): void {
    if ((flags & (PACKED_FLAG_OTHER_MEDIUM | PACKED_FLAG_LORA)) !== 0) {
      s.ignored += count;
      return;
    }
    let seed = BigInt(blockSize);
    if ((flags & PACKED_FLAG_PARENT) !== 0) {
      const parentKey = s.engine.get(p.hashes[h]!);
      if (parentKey === undefined) {
        s.orphaned += count;
        return;
      }
      seed = parentKey;
      h += 1;
    }
    for (let j = 0; j < count; j += 1) {
      seed = tokenBlockKey(p.tokens, t + j * blockSize, blockSize, seed);
      s.stored += 1;
      const hash = p.hashes[h + j]!;
      if (s.engine.has(hash)) continue; // a re-store: idempotent
      s.engine.set(hash, seed);
      s.refs.set(seed, (s.refs.get(seed) ?? 0) + 1);
    }
  }

  private removed(s: SlotEvents, flags: number, count: number, p: PackedKvEvents, h: number): void {
    if ((flags & PACKED_FLAG_OTHER_MEDIUM) !== 0) {
      s.ignored += count;
      return;
    }
    for (let j = 0; j < count; j += 1) {
      const hash = p.hashes[h + j]!;
      const key = s.engine.get(hash);
      if (key === undefined) {
        s.unknownRemoved += 1;
        continue;
      }
      s.engine.delete(hash);
      const refs = s.refs.get(key)! - 1;
      if (refs === 0) s.refs.delete(key);
      else s.refs.set(key, refs);
      s.removed += 1;
    }
  }

  /**
   * For each event-fed slot: matched[s] = how many of ids[0..limit) it holds, from the first. A
   * position is held when the events hold its key, or an in-flight request on the slot shares the
   * request's keys up to and including it.
   */
  match(ids: readonly bigint[], limit: number, matched: Int32Array): void {
    this.slots.forEach((s, slot) => {
      if (!s.fed) return;
      let covered = 0;
      for (const other of s.inFlight.values()) {
        let k = 0;
        while (k < limit && k < other.length && other[k] === ids[k]) k += 1;
        covered = Math.max(covered, k);
      }
      let k = 0;
      while (k < limit && (k < covered || s.refs.has(ids[k]!))) k += 1;
      matched[slot] = k;
    });
  }

  stats(slot: number, out: Float64Array): void {
    if (out.length < EVENT_STAT_FIELDS) throw rangeError('ERR_KVROUTE_INVALID_ARG_VALUE', 'eventStats is too short');
    const s = this.at(slot);
    out.set([
      s.stored,
      s.removed,
      s.cleared,
      s.ignored,
      s.orphaned,
      s.unknownRemoved,
      s.refs.size,
      s.engine.size,
      s.fed ? 1 : 0,
    ]);
  }
}
