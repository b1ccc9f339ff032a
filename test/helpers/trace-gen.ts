/**
 * Generated multi-session traces with chained block ids, shaped like agentic
 * traffic: each turn resends the previous prompt (minus its partial last
 * block) and appends new blocks; some sessions start from a shared system
 * prefix; some turns branch from an earlier point (a retry or an edit).
 */
import { Rng } from './random.js';

export interface TraceOptions {
  seed: number;
  requests: number;
  /** Sessions open at once. */
  concurrentSessions: number;
  /** Blocks of a session's first prompt. */
  firstTurnBlocks: [number, number];
  /** Blocks appended per later turn. */
  appendBlocks: [number, number];
  turnsPerSession: [number, number];
  sharedPrefixes?: number;
  sharedPrefixBlocks?: number;
  branchProbability?: number;
  /** Full-range random 64-bit ids (BigUint64Array) instead of small integers (Float64Array). */
  bigIds?: boolean;
  blockSize?: number;
}

export interface TraceRequest {
  session: string;
  turn: number;
  ids: Float64Array | BigUint64Array;
  inputTokens: number;
}

interface Session {
  name: string;
  turn: number;
  turnsLeft: number;
  ids: Array<number | bigint>;
}

export function generateTrace(o: TraceOptions): TraceRequest[] {
  const rng = new Rng(o.seed);
  const blockSize = o.blockSize ?? 16;
  let counter = 1;
  const fresh = (): number | bigint => (o.bigIds ? rng.u64() : counter++);
  const shared: Array<Array<number | bigint>> = [];
  for (let k = 0; k < (o.sharedPrefixes ?? 0); k += 1) {
    shared.push(Array.from({ length: o.sharedPrefixBlocks ?? 4 }, fresh));
  }
  const open: Session[] = [];
  let sessionCount = 0;
  const out: TraceRequest[] = [];
  while (out.length < o.requests) {
    if (open.length < o.concurrentSessions) {
      const prefix = shared.length > 0 && rng.chance(0.5) ? [...rng.pick(shared)] : [];
      open.push({ name: `s${sessionCount++}`, turn: -1, turnsLeft: rng.int(...o.turnsPerSession), ids: prefix });
    }
    const index = rng.int(0, open.length - 1);
    const s = open[index]!;
    if (s.turn < 0) {
      s.ids.push(...Array.from({ length: rng.int(...o.firstTurnBlocks) }, fresh));
    } else if (rng.chance(o.branchProbability ?? 0.05)) {
      s.ids = s.ids.slice(0, rng.int(0, s.ids.length));
      s.ids.push(...Array.from({ length: rng.int(1, o.appendBlocks[1]) }, fresh));
    } else {
      // The previous prompt's partial last block is completed, so it gets a new id.
      s.ids = s.ids.slice(0, -1);
      s.ids.push(...Array.from({ length: rng.int(...o.appendBlocks) + 1 }, fresh));
    }
    s.turn += 1;
    const ids = o.bigIds ? BigUint64Array.from(s.ids as bigint[]) : Float64Array.from(s.ids as number[]);
    out.push({
      session: s.name,
      turn: s.turn,
      ids,
      inputTokens: Math.max(0, s.ids.length * blockSize - rng.int(0, blockSize - 1)),
    });
    s.turnsLeft -= 1;
    if (s.turnsLeft <= 0) open.splice(index, 1);
  }
  return out;
}
