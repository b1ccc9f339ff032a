/**
 * The B2 prefill–decode interference microbench, run on two engine models in virtual
 * time, by the protocol of interference-protocol.ts (the same one `kvroute bench interference`
 * runs against live endpoints).
 */
import type { EnginePreset } from './engine-preset.js';
import { EngineModel, type Sequence } from './engine-model.js';
import { EventQueue } from './event-queue.js';
import {
  INTERFERENCE_PREFILL_TOKENS,
  INTERFERENCE_SCHEDULE,
  INTERFERENCE_VARIANTS,
  interferenceIndices,
  type InterferenceCell,
  type InterferenceVariant,
} from './interference-protocol.js';

export type { InterferenceCell } from './interference-protocol.js';

export interface InterferenceOptions {
  preset: EnginePreset;
  prefillTokens: number;
  variant: InterferenceVariant;
  durationS?: number;
  decodeRate?: number;
  decodePromptTokens?: number;
  decodeOutputTokens?: number;
  injections?: number;
  injectionEveryS?: number;
}

const BLOCK = 16;

export function interferenceCell(options: InterferenceOptions): InterferenceCell {
  const d = INTERFERENCE_SCHEDULE;
  const duration = options.durationS ?? d.durationS;
  const rate = options.decodeRate ?? d.decodeRate;
  const every = options.injectionEveryS ?? d.injectionEveryS;
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
  // The injector is sequential, as the reference experiments' driver: it waits for an injection's response, then
  // `every` seconds, then sends the next. (A fixed 12 s clock would chain 15 s windows at 65k into
  // one, leaving no clean decodes; the reference experiments counted 110 clean there.)
  const injections = options.injections ?? d.injections;
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
        : {
            ...fresh(options.decodePromptTokens ?? d.decodePromptTokens),
            outputLength: options.decodeOutputTokens ?? d.decodeOutputTokens,
          };
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
  const timings = decodes.map((s) => ({
    sent: s.submittedAt,
    firstToken: s.firstTokenAt!,
    finish: s.finishedAt!,
    outputTokens: s.request.outputLength,
  }));
  return interferenceIndices(options.variant, options.prefillTokens, timings, windows);
}

/** The B2 grid: both variants × 2k, 8k, 16k, 32k, 65k prefills. */
export function interferenceTable(preset: EnginePreset): InterferenceCell[] {
  const cells: InterferenceCell[] = [];
  for (const variant of INTERFERENCE_VARIANTS)
    for (const prefillTokens of INTERFERENCE_PREFILL_TOKENS)
      cells.push(interferenceCell({ preset, prefillTokens, variant }));
  return cells;
}
