/**
 * The engine-state log a replay writes beside its records (`replay --engine-state`, one JSON
 * line per engine per scrape, docs/records.md): `{"t", "engine", "running", "waiting",
 * "kv_usage", …}` or `{"t", "engine", "error"}`. `t` is seconds on the records' clock; engine i
 * is instance i. Used by the hot-worker rule (slow-causes.ts): the queue an instance reported
 * at a request's dispatch.
 *
 * A sample answers for at most `MAX_AGE_S` (2 s, the router's staleness limit for a snapshot);
 * error lines are skipped; a last line cut off mid-way (a killed replay) is ignored; any other
 * line that is not a sample is refused, naming the file and line. Lookups are binary searches
 * over each engine's samples sorted by time.
 */
import { readFileSync } from 'node:fs';

import { ioError } from '../trace/trace-errors.js';

export const MAX_AGE_S = 2;

/** A bad engine-state file. A data error (exit 1). */
export class EngineStateFileError extends Error {
  readonly code = 'ERR_KVROUTE_RECORDS' as const;
}

export class EngineStates {
  private readonly times: Float64Array[] = [];
  private readonly waiting: Float64Array[] = [];

  constructor(samples: readonly { t: number; engine: number; waiting: number }[]) {
    const byEngine = new Map<number, { t: number; waiting: number }[]>();
    for (const s of samples) {
      let list = byEngine.get(s.engine);
      if (list === undefined) byEngine.set(s.engine, (list = []));
      list.push(s);
    }
    for (const [engine, list] of byEngine) {
      list.sort((a, b) => a.t - b.t);
      this.times[engine] = Float64Array.from(list, (s) => s.t);
      this.waiting[engine] = Float64Array.from(list, (s) => s.waiting);
    }
  }

  /** Requests waiting on `engine` by its latest sample at or before t, if that is ≤ 2 s old. */
  waitingAt(engine: number, t: number): number | undefined {
    const times = this.times[engine];
    if (times === undefined) return undefined;
    let low = 0;
    let high = times.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (times[mid]! <= t) low = mid + 1;
      else high = mid;
    }
    if (low === 0 || t - times[low - 1]! > MAX_AGE_S) return undefined;
    return this.waiting[engine]![low - 1]!;
  }

  /** Mean waiting over the engines with a fresh sample at t (0 when none has one). */
  meanWaitingAt(t: number): number {
    let sum = 0;
    let engines = 0;
    for (let engine = 0; engine < this.times.length; engine++) {
      const w = this.waitingAt(engine, t);
      if (w === undefined) continue;
      sum += w;
      engines++;
    }
    return engines === 0 ? 0 : sum / engines;
  }
}

export function readEngineStates(path: string): EngineStates {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw ioError(path, error);
  }
  const lines = text.split('\n');
  const samples: { t: number; engine: number; waiting: number }[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === '') return;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      if (i === lines.length - 1) return; // cut off by a killed replay
      throw new EngineStateFileError(`${path}:line ${i + 1}: not JSON; is it an engine-state log?`);
    }
    const v = value as Record<string, unknown>;
    if (typeof v !== 'object' || v === null || typeof v.t !== 'number' || !Number.isSafeInteger(v.engine))
      throw new EngineStateFileError(`${path}:line ${i + 1}: not an engine-state sample (needs t and engine)`);
    if (v.error !== undefined) return;
    if (typeof v.waiting !== 'number')
      throw new EngineStateFileError(`${path}:line ${i + 1}: waiting must be a number`);
    samples.push({ t: v.t, engine: v.engine as number, waiting: v.waiting });
  });
  return new EngineStates(samples);
}
