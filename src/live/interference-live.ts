/**
 * The B2 interference microbench against two live OpenAI-compatible endpoints (vLLM,
 * SGLang, or kvroute's simulated engines), by the protocol the engine-model run uses
 * (src/sim/interference-protocol.ts): the same schedule, the same overlap rule, the same indices.
 *
 * Time: the protocol's schedule is in engine seconds. Against engines that run `speed` times
 * faster than real time (`kvroute sim serve --speed`), every wait is divided by `speed` and every
 * measured time multiplied by it, so the cell reads in engine seconds either way.
 *
 * Bounds: a cell sends at most durationS × decodeRate decodes and `injections` prefills, each
 * with a deadline; the first failed request ends the cell with its error (a bench with failed
 * requests measures nothing).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';

import {
  INTERFERENCE_SCHEDULE,
  interferenceIndices,
  type DecodeTiming,
  type InterferenceCell,
  type InterferenceSchedule,
  type InterferenceVariant,
} from '../sim/interference-protocol.js';
import { coldPrompt } from './cold-prompt.js';
import { streamCompletion, type CompletionTiming } from './completion-stream.js';

export interface LiveInterferenceOptions {
  decodeEndpoint: string;
  prefillEndpoint: string;
  /** The model to ask for (checkTarget in src/replay/target-check.ts finds what an endpoint serves). */
  model: string;
  schedule?: Partial<InterferenceSchedule>;
  /** Send vLLM's `ignore_eos` (default true). */
  ignoreEos?: boolean;
  /** Engine seconds per wall second of the endpoints (default 1). */
  speed?: number;
  /** A request's deadline, engine seconds (default 600). */
  requestTimeoutS?: number;
}

export async function liveInterferenceCell(
  variant: InterferenceVariant,
  prefillTokens: number,
  options: LiveInterferenceOptions,
): Promise<InterferenceCell> {
  const s = { ...INTERFERENCE_SCHEDULE, ...options.schedule };
  const speed = options.speed ?? 1;
  const dispatcher = new Agent({ connections: 256, headersTimeout: 0, bodyTimeout: 0 });
  const started = performance.now();
  const now = (): number => ((performance.now() - started) / 1000) * speed;
  const waitUntil = (engineSeconds: number): Promise<void> =>
    sleep(Math.max(0, (engineSeconds - now()) / speed) * 1000);
  const { model } = options;
  const failed = new AbortController();
  let failure: Error | undefined;
  const send = (url: string, tokens: number, maxTokens: number): Promise<CompletionTiming | undefined> =>
    streamCompletion({
      url,
      model,
      prompt: coldPrompt(tokens),
      maxTokens,
      ignoreEos: options.ignoreEos ?? true,
      dispatcher,
      now,
      signal: AbortSignal.any([failed.signal, AbortSignal.timeout(((options.requestTimeoutS ?? 600) / speed) * 1000)]),
    }).catch((error: Error) => {
      failure ??= error;
      failed.abort();
      return undefined;
    });
  try {
    const decodes: Array<Promise<CompletionTiming | undefined>> = [];
    const decodeLoad = (async () => {
      for (let k = 0; k / s.decodeRate < s.durationS && failure === undefined; k++) {
        await waitUntil(k / s.decodeRate);
        decodes.push(send(options.decodeEndpoint, s.decodePromptTokens, s.decodeOutputTokens));
      }
    })();
    const windows: Array<[number, number]> = [];
    const injector = (async () => {
      const target = variant === 'same' ? options.decodeEndpoint : options.prefillEndpoint;
      let next = s.injectionEveryS / 2;
      for (let i = 0; i < s.injections && failure === undefined; i++) {
        await waitUntil(next);
        const timing = await send(target, prefillTokens, 1);
        if (timing === undefined) return;
        windows.push([timing.sent, timing.firstToken]);
        next = timing.finish + s.injectionEveryS;
      }
    })();
    await Promise.all([decodeLoad, injector]);
    const timings = await Promise.all(decodes);
    if (failure !== undefined) throw failure;
    const decoded: DecodeTiming[] = timings.map((t) => ({
      sent: t!.sent,
      firstToken: t!.firstToken,
      finish: t!.finish,
      outputTokens: t!.outputTokens,
    }));
    return interferenceIndices(variant, prefillTokens, decoded, windows);
  } finally {
    await dispatcher.close();
  }
}
