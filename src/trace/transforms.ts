/**
 * Streaming trace transforms, applied in this order to a trace in arrival order:
 *   1. time window      keep arrivals in [windowStart, windowStart + window); arrivals are
 *                       re-based so the window starts at 0 s. Without windowStart the window
 *                       opens at the first request's arrival (traces with epoch timestamps);
 *   2. session sampling keep a session when a seeded hash of its id falls below the rate, so a
 *                       session is kept or dropped whole, with no memory of earlier lines;
 *   3. turn cap         keep each session's first `capTurns` requests (the reference experiments' `capped`);
 *   4. time scaling     multiply arrivals by `timeScale` (0.5 replays twice as fast);
 *   5. re-blocking      merge every k = blockSize / current blocks into one (see reblock);
 *   6. tenants          give each session a tenant and class by a seeded draw (tenant-spec.ts).
 * Memory: one counter per session for the turn cap, nothing otherwise.
 */
import { invalidValue } from '../core/errors.js';
import { tenantFor, type TenantShare } from './tenant-spec.js';
import type { TraceRequest } from './types.js';

export interface TransformOptions {
  windowStart?: number;
  window?: number;
  sampleSessions?: number;
  seed?: number;
  capTurns?: number;
  timeScale?: number;
  blockSize?: number;
  /** Sessions to tenants (and classes) by share; replaces any tenant and priority the trace had. */
  tenants?: TenantShare[];
}

export function validateTransformOptions(options: TransformOptions): void {
  const positive = (field: keyof TransformOptions, value: number | undefined): void => {
    if (value !== undefined && !(Number.isFinite(value) && value > 0))
      throw invalidValue(field, 'a positive number', value);
  };
  const positiveInteger = (field: keyof TransformOptions, value: number | undefined): void => {
    if (value !== undefined && !(Number.isSafeInteger(value) && value > 0))
      throw invalidValue(field, 'a positive integer', value);
  };
  if (options.windowStart !== undefined && !(Number.isFinite(options.windowStart) && options.windowStart >= 0))
    throw invalidValue('windowStart', 'a non-negative number of seconds', options.windowStart);
  positive('window', options.window);
  if (options.sampleSessions !== undefined && !(options.sampleSessions > 0 && options.sampleSessions <= 1))
    throw invalidValue('sampleSessions', 'a fraction in (0, 1]', options.sampleSessions);
  if (options.seed !== undefined && !Number.isSafeInteger(options.seed))
    throw invalidValue('seed', 'an integer', options.seed);
  positiveInteger('capTurns', options.capTurns);
  positive('timeScale', options.timeScale);
  positiveInteger('blockSize', options.blockSize);
}

export async function* transformTrace(
  source: AsyncIterable<TraceRequest>,
  options: TransformOptions,
): AsyncGenerator<TraceRequest> {
  validateTransformOptions(options);
  // Known once the first request is read, when the window opens at it.
  let start = options.windowStart ?? 0;
  let end = Infinity;
  let opened = false;
  const rate = options.sampleSessions ?? 1;
  const seed = options.seed ?? 0;
  const scale = options.timeScale ?? 1;
  const turnsKept = options.capTurns === undefined ? undefined : new Map<string, number>();
  for await (const request of source) {
    if (!opened) {
      opened = true;
      if (options.window !== undefined && options.windowStart === undefined) start = request.arrival;
      if (options.window !== undefined) end = start + options.window;
    }
    if (request.arrival < start) continue;
    // Arrivals are non-decreasing (the reader counts any that are not), so nothing later can
    // fall back inside the window: stop reading.
    if (request.arrival >= end) break;
    if (rate < 1 && sessionDraw(request.session, seed) >= rate) continue;
    if (turnsKept !== undefined) {
      const kept = turnsKept.get(request.session) ?? 0;
      if (kept >= options.capTurns!) continue;
      turnsKept.set(request.session, kept + 1);
    }
    const arrival = (request.arrival - start) * scale;
    const hashIds = options.blockSize === undefined ? request.hashIds : reblock(request, options.blockSize);
    const blockSize = options.blockSize ?? request.blockSize;
    const out: TraceRequest = { ...request, arrival, hashIds, blockSize };
    if (options.tenants !== undefined) {
      // Its own salt: which sessions are kept and which tenant each gets are independent draws.
      const tenant = tenantFor(options.tenants, sessionDraw(request.session, seed + TENANT_SALT));
      out.tenant = tenant.name;
      if (tenant.priority === undefined) delete out.priority;
      else out.priority = tenant.priority;
    }
    yield out;
  }
}

/**
 * Merges k = `blockSize / request.blockSize` consecutive ids into one. Ids are chained, so the
 * last original id inside a merged block already stands for the whole prefix up to it; a
 * partial last merged block takes the request's last id.
 */
export function reblock(request: TraceRequest, blockSize: number): number[] {
  if (blockSize % request.blockSize !== 0)
    throw invalidValue('blockSize', `a multiple of the trace's block size ${request.blockSize}`, blockSize);
  const factor = blockSize / request.blockSize;
  const ids = request.hashIds;
  const merged = new Array<number>(Math.ceil(ids.length / factor));
  for (let block = 0; block < merged.length; block++)
    merged[block] = ids[Math.min((block + 1) * factor, ids.length) - 1]!;
  return merged;
}

const TENANT_SALT = 0x5bd1e995;

/** A uniform draw in [0, 1) fixed by the session id and the seed (FNV-1a, then a murmur finish). */
export function sessionDraw(session: string, seed: number): number {
  let h = 0x811c9dc5 ^ Math.imul(seed | 0, 0x9e3779b1) ^ Math.floor(seed / 4294967296);
  for (let i = 0; i < session.length; i++) h = Math.imul(h ^ session.charCodeAt(i), 0x01000193);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 4294967296;
}
