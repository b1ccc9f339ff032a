/**
 * The seeds' B2 prefill–decode interference microbench, run on two engine models.
 *
 * Engine 0 serves a steady decode load: 128-token prompts with 64 output tokens at `decodeRate`
 * per second for `durationS`. Four large one-token prefills ("injections") go either to engine 0
 * (`same`) or to engine 1 (`different`), the first at 6 s and each next one 12 s after the
 * previous one answered. A decode request overlaps when its
 * [first token, finish] interval touches an injection's [send, first token] window. The TTFT and
 * TPOT indices are p90(overlapping) ÷ p90(clean). Every prompt is unique (no cache hits), as in
 * the seeds' corrected driver.
 */
import type { EnginePreset } from './engine-preset.js';
import { EngineModel, type Sequence } from './engine-model.js';
import { EventQueue } from './event-queue.js';

export interface InterferenceOptions {
  preset: EnginePreset;
  prefillTokens: number;
  variant: 'same' | 'different';
  durationS?: number;
  decodeRate?: number;
  decodePromptTokens?: number;
  decodeOutputTokens?: number;
  injections?: number;
  injectionEveryS?: number;
}

export interface InterferenceCell {
  variant: 'same' | 'different';
  prefill_tokens: number;
  n_overlap: number;
  n_clean: number;
  tpot_index: number | null;
  ttft_index: number | null;
}

const BLOCK = 16;

function p90(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const rank = 0.9 * (sorted.length - 1);
  const low = Math.floor(rank);
  return sorted[low]! + (sorted[Math.min(low + 1, sorted.length - 1)]! - sorted[low]!) * (rank - low);
}

export function interferenceCell(options: InterferenceOptions): InterferenceCell {
  const duration = options.durationS ?? 60;
  const rate = options.decodeRate ?? 4;
  const every = options.injectionEveryS ?? 12;
  const engines = [0, 1].map(() => new EngineModel({ preset: options.preset, blockSize: BLOCK }));
  let nextId = 1;
  const fresh = (tokens: number) => ({
    id: nextId,
    hashIds: Array.from({ length: Math.ceil(tokens / BLOCK) }, () => nextId++),
    inputLength: tokens,
    outputLength: 0,
  });
  type Event = { kind: 'send'; engine: number; injection: boolean } | { kind: 'step'; engine: number };
  const queue = new EventQueue<Event>();
  for (let t = 0; t < duration; t += 1 / rate) queue.push(t, { kind: 'send', engine: 0, injection: false });
  // The injector is sequential, as the seeds' driver: it waits for an injection's response, then
  // `every` seconds, then sends the next. (A fixed 12 s clock would chain 15 s windows at 65k into
  // one, leaving no clean decodes; the seeds counted 110 clean there.)
  const injections = options.injections ?? 4;
  const injectionEngine = options.variant === 'same' ? 0 : 1;
  queue.push(every / 2, { kind: 'send', engine: injectionEngine, injection: true });
  const stepping = [false, false];
  const decodes: Sequence[] = [];
  const injected: Sequence[] = [];
  const kick = (engine: number, now: number): void => {
    if (stepping[engine]) return;
    const outcome = engines[engine]!.step(now);
    if (outcome === undefined) return;
    stepping[engine] = true;
    queue.push(outcome.end, { kind: 'step', engine });
  };
  for (let event = queue.pop(); event !== undefined; event = queue.pop()) {
    const { time, event: e } = event;
    if (e.kind === 'send') {
      const request = e.injection
        ? { ...fresh(options.prefillTokens), outputLength: 1 }
        : { ...fresh(options.decodePromptTokens ?? 128), outputLength: options.decodeOutputTokens ?? 64 };
      (e.injection ? injected : decodes).push(engines[e.engine]!.submit(request, time));
    } else {
      stepping[e.engine] = false;
      const last = injected[injected.length - 1];
      if (last?.finishedAt === time && injected.length < injections)
        queue.push(time + every, { kind: 'send', engine: injectionEngine, injection: true });
    }
    kick(e.engine, time);
  }
  const windows = injected.map((s) => [s.submittedAt, s.firstTokenAt!] as const);
  const groups = {
    overlap: { ttft: [] as number[], tpot: [] as number[] },
    clean: { ttft: [] as number[], tpot: [] as number[] },
  };
  for (const s of decodes) {
    const first = s.firstTokenAt!;
    const finish = s.finishedAt!;
    const overlaps = windows.some(([start, end]) => first <= end && finish >= start);
    const group = overlaps ? groups.overlap : groups.clean;
    group.ttft.push(first - s.submittedAt);
    group.tpot.push((finish - first) / (s.request.outputLength - 1));
  }
  const index = (overlap: number[], clean: number[]): number | null =>
    overlap.length === 0 || clean.length === 0 ? null : p90(overlap) / p90(clean);
  return {
    variant: options.variant,
    prefill_tokens: options.prefillTokens,
    n_overlap: groups.overlap.ttft.length,
    n_clean: groups.clean.ttft.length,
    tpot_index: index(groups.overlap.tpot, groups.clean.tpot),
    ttft_index: index(groups.overlap.ttft, groups.clean.ttft),
  };
}

/** The seeds' B2 grid: both variants × 2k, 8k, 16k, 32k, 65k prefills. */
export function interferenceTable(preset: EnginePreset): InterferenceCell[] {
  const cells: InterferenceCell[] = [];
  for (const variant of ['different', 'same'] as const)
    for (const prefillTokens of [2048, 8192, 16384, 32768, 65536])
      cells.push(interferenceCell({ preset, prefillTokens, variant }));
  return cells;
}
