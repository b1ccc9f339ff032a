/**
 * The load plane's one message (docs/scale-out.md, "One load plane over NATS"): what a router
 * replica publishes on `kvroute.<fleet>.load.<replica>` every flush, msgpack-encoded as a map.
 *
 *   { v: 1, r: replica, s: seq, f: full, t: sentAtMs,
 *     i: [[instance, running, waiting, prefillTokens, activeBlocks], …],
 *     p: [[session, instance, model | null], …] }
 *
 * `i` carries the replica's OWN in-flight totals per instance (its shadow counters, never what it
 * heard from peers), for the instances whose totals changed since its last message, or for every
 * instance when `f` (full) is true. Totals rather than per-ticket deltas, so that a lost or late
 * message cannot leave a receiver off by a request forever: the next message about the instance,
 * and at the latest the next full one, states it exactly. `p` lists the sessions it placed since
 * its last message, with the instance and model.
 *
 * Invariant: decode() accepts only what encode() can produce (every count a safe integer >= 0,
 * every name a non-empty string); anything else is a LoadMessageError naming the field, and the
 * receiver drops the message whole.
 */
import { Packr } from 'msgpackr';

export const LOAD_MESSAGE_VERSION = 1;

/** One instance's totals: [running, waiting, prefillTokens, activeBlocks]. */
export type LoadTotals = readonly [number, number, number, number];

export interface LoadMessage {
  replica: string;
  seq: number;
  full: boolean;
  sentAtMs: number;
  load: ReadonlyArray<readonly [instance: string, totals: LoadTotals]>;
  placements: ReadonlyArray<readonly [session: string, instance: string, model: string | null]>;
}

export class LoadMessageError extends Error {
  readonly code = 'ERR_KVROUTE_LOAD_MESSAGE';
}

// Plain maps and arrays on the wire (no msgpackr records), so any msgpack reader can read it.
const packr = new Packr({ useRecords: false, mapsAsObjects: true });

export function encodeLoadMessage(m: LoadMessage): Uint8Array {
  return packr.pack({
    v: LOAD_MESSAGE_VERSION,
    r: m.replica,
    s: m.seq,
    f: m.full,
    t: m.sentAtMs,
    i: m.load.map(([instance, t]) => [instance, t[0], t[1], t[2], t[3]]),
    p: m.placements.map(([session, instance, model]) => [session, instance, model]),
  });
}

const fail = (field: string, why: string): never => {
  throw new LoadMessageError(`load message: ${field} ${why}`);
};
const name = (field: string, v: unknown): string =>
  typeof v === 'string' && v.length > 0 ? v : fail(field, 'must be a non-empty string');
const count = (field: string, v: unknown): number =>
  Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : fail(field, 'must be an integer >= 0');

export function decodeLoadMessage(bytes: Uint8Array): LoadMessage {
  let raw: unknown;
  try {
    raw = packr.unpack(bytes);
  } catch (error) {
    return fail('payload', `is not msgpack (${(error as Error).message})`);
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw) || raw.constructor !== Object)
    return fail('payload', 'must be a map');
  const o = raw as Record<string, unknown>;
  if (o.v !== LOAD_MESSAGE_VERSION) fail('v', `must be ${LOAD_MESSAGE_VERSION} (a replica of another version?)`);
  if (typeof o.f !== 'boolean') fail('f', 'must be a boolean');
  if (!(typeof o.t === 'number' && Number.isFinite(o.t))) fail('t', 'must be a finite number');
  if (!Array.isArray(o.i)) fail('i', 'must be an array');
  if (!Array.isArray(o.p)) fail('p', 'must be an array');
  const load = (o.i as unknown[]).map((entry, k) => {
    if (!Array.isArray(entry) || entry.length !== 5) return fail(`i[${k}]`, 'must be [instance, 4 counts]');
    const totals: LoadTotals = [
      count(`i[${k}][1]`, entry[1]),
      count(`i[${k}][2]`, entry[2]),
      count(`i[${k}][3]`, entry[3]),
      count(`i[${k}][4]`, entry[4]),
    ];
    return [name(`i[${k}][0]`, entry[0]), totals] as const;
  });
  const placements = (o.p as unknown[]).map((entry, k) => {
    if (!Array.isArray(entry) || entry.length !== 3) return fail(`p[${k}]`, 'must be [session, instance, model]');
    const model = entry[2] === null ? null : name(`p[${k}][2]`, entry[2]);
    return [name(`p[${k}][0]`, entry[0]), name(`p[${k}][1]`, entry[1]), model] as const;
  });
  return {
    replica: name('r', o.r),
    seq: count('s', o.s),
    full: o.f as boolean,
    sentAtMs: o.t as number,
    load,
    placements,
  };
}
