/**
 * `replay(options)`: drives an OpenAI-compatible endpoint (kvroute serve, one vLLM/SGLang
 * server, or kvroute sim serve) with a trace in real time, and writes one RequestRecord per
 * request (docs/replay.md).
 *
 * Order of a run: read the trace (up to maxRequests) → check the target (a down target throws
 * ReplayError before any file is created) → open the record file with its RunHeader → dispatch
 * (dispatcher.ts) → on the end, a stop (signal, duration, dead target): stop sending, give the
 * in-flight requests `grace` seconds, abort the rest (recorded with an `aborted:` error) →
 * close the files.
 *
 * Invariants:
 * - Every request sent is recorded exactly once, success or not; nothing unsent is recorded.
 * - The record file is closed on every path out of replay() once opened (readable by
 *   readRecordFile whatever stopped the run).
 * - `maxConnectionFailures` consecutive requests without an HTTP response stop the run
 *   (stoppedBy 'target-down'); any answered request resets the count.
 */
import { setMaxListeners } from 'node:events';

import { RecordWriter } from '../trace/record-file.js';
import type { RequestRecord, RunHeader } from '../trace/records.js';
import { readTrace, type ReadTraceOptions, type TraceReadStats } from '../trace/read-trace.js';
import { TraceFingerprint } from '../trace/trace-fingerprint.js';
import type { TraceRequest } from '../trace/types.js';
import { BlockText } from './block-text.js';
import { dispatch, type DispatchMode } from './dispatcher.js';
import { EngineStateLog } from './engine-state-log.js';
import { ReplayTally } from './replay-tally.js';
import { checkTarget } from './target-check.js';
import { InstanceIndex, isConnectionFailure, TargetClient } from './target-client.js';

export interface ReplayOptions {
  /** A trace file (any format kvroute reads), or preloaded requests (`requests` wins). */
  trace: string;
  requests?: readonly TraceRequest[];
  /** The fingerprint of preloaded `requests` (else computed). */
  fingerprint?: string;
  readerOptions?: ReadTraceOptions;
  /** Base URL of the endpoint driven. */
  target: string;
  /** Record file; none when absent. */
  records?: string;
  /** Default `{mode: 'session'}`. */
  dispatch?: DispatchMode;
  /** Trace seconds per replay second (session mode). Default 1. */
  speed?: number;
  maxRequests?: number;
  /** Stop sending after this many seconds. */
  duration?: number;
  /** Seconds in-flight requests get after a stop. Default 10. */
  grace?: number;
  /** Sockets to the target. Default 256. */
  connections?: number;
  /** Send `ignore_eos: true`. Default true. */
  ignoreEos?: boolean;
  /** Send the trace's `hash_ids` (and `input_tokens`). Default true. */
  sendHashIds?: boolean;
  /** Model name; default the first the target lists. */
  model?: string;
  /** Engine /metrics URLs to scrape into `${records}.engine-state`. */
  engineState?: readonly string[];
  engineStateIntervalMs?: number;
  /** Consecutive connection failures that stop the run. Default 20. */
  maxConnectionFailures?: number;
  /** Aborting it stops the run (Ctrl-C). */
  signal?: AbortSignal;
  /** Header facts of the caller (the CLI's command line is taken by runHeader). */
  header?: (facts: Omit<RunHeader, 'format' | 'version' | 'kvroute_version' | 'command' | 'started_at'>) => RunHeader;
  /** Called once the run has started, with the tally it updates (progress displays). */
  onStart?: (tally: ReplayTally, total: number) => void;
}

export type StopCause = 'end' | 'signal' | 'duration' | 'target-down';

export interface ReplayResult {
  sent: number;
  done: number;
  errors: number;
  aborted: number;
  stoppedBy: StopCause;
  /** Seconds from the first send to the last record. */
  elapsed: number;
  /** Successful requests' TTFT and TPOT (s), for SLO checks. */
  ttft: number[];
  tpot: number[];
  /** Prompt and cached tokens summed over successful requests. */
  inputTokens: number;
  cachedTokens: number;
  /** Index → x-kvroute-instance value (empty for a plain engine). */
  instances: string[];
  model: string;
  lastError: string | undefined;
  traceStats?: TraceReadStats;
}

export const REPLAY_DEFAULTS = {
  speed: 1,
  grace: 10,
  connections: 256,
  maxConnectionFailures: 20,
  engineStateIntervalMs: 1000,
} as const;

/** Reads up to `max` requests, fingerprinting those kept. */
export async function loadTrace(
  path: string,
  readerOptions: ReadTraceOptions | undefined,
  max = Infinity,
): Promise<{ requests: TraceRequest[]; fingerprint: string; stats: TraceReadStats }> {
  const reader = readTrace(path, readerOptions);
  const fingerprint = new TraceFingerprint();
  const requests: TraceRequest[] = [];
  for await (const request of reader) {
    if (requests.length >= max) break;
    fingerprint.add(request);
    requests.push(request);
  }
  return { requests, fingerprint: fingerprint.digest(), stats: reader.stats };
}

export async function replay(options: ReplayOptions): Promise<ReplayResult> {
  const d = REPLAY_DEFAULTS;
  let traceStats: TraceReadStats | undefined;
  let requests = options.requests;
  let fingerprint = options.fingerprint;
  if (requests === undefined) {
    const loaded = await loadTrace(options.trace, options.readerOptions, options.maxRequests);
    ({ requests, fingerprint } = loaded);
    traceStats = loaded.stats;
  } else if (options.maxRequests !== undefined) requests = requests.slice(0, options.maxRequests);
  if (fingerprint === undefined) {
    const f = new TraceFingerprint();
    for (const request of requests) f.add(request);
    fingerprint = f.digest();
  }
  const model = await checkTarget(options.target, options.model);
  const mode = options.dispatch ?? { mode: 'session' };
  const origin = performance.now();
  const clock = (): number => (performance.now() - origin) / 1000;
  const facts = {
    source: 'replay' as const,
    trace: { path: options.trace, fingerprint },
    target: options.target,
    mode: mode.mode,
    ...(mode.mode === 'poisson' ? { rate: mode.rate } : {}),
  };
  const header = options.header?.(facts) ?? (await import('../trace/run-header.js')).runHeader(facts);
  const writer = options.records === undefined ? undefined : new RecordWriter(options.records, header);
  let engineLog: EngineStateLog | undefined;
  try {
    if (options.engineState !== undefined && options.engineState.length > 0 && options.records !== undefined)
      engineLog = new EngineStateLog({
        path: `${options.records}.engine-state`,
        urls: options.engineState,
        intervalMs: options.engineStateIntervalMs ?? d.engineStateIntervalMs,
        clock,
      });
  } catch (error) {
    writer?.close();
    throw error;
  }
  const instances = new InstanceIndex(options.engineState ?? []);
  const client = new TargetClient({
    target: options.target,
    model,
    // A trace has one block size (the reader infers or checks it).
    text: new BlockText(requests[0]?.blockSize ?? 16),
    connections: options.connections ?? d.connections,
    ignoreEos: options.ignoreEos ?? true,
    sendHashIds: options.sendHashIds ?? true,
    origin,
    instances,
  });
  const tally = new ReplayTally();
  const stopSending = new AbortController();
  // Every waiting session chain listens: no limit applies.
  setMaxListeners(0, stopSending.signal);
  let stoppedBy: StopCause = 'end';
  const stop = (cause: StopCause): void => {
    if (stopSending.signal.aborted) return;
    stoppedBy = cause;
    stopSending.abort();
  };
  const onSignal = (): void => stop('signal');
  options.signal?.addEventListener('abort', onSignal);
  if (options.signal?.aborted) stop('signal');
  const durationTimer =
    options.duration === undefined ? undefined : setTimeout(() => stop('duration'), options.duration * 1000);
  const maxFailures = options.maxConnectionFailures ?? d.maxConnectionFailures;
  let consecutive = 0;
  const send = async (request: TraceRequest): Promise<void> => {
    tally.sent++;
    const record: RequestRecord = await client.send(request);
    tally.finish(record);
    writer?.write(record);
    if (isConnectionFailure(record)) {
      if (++consecutive >= maxFailures) stop('target-down');
    } else consecutive = 0;
  };
  options.onStart?.(tally, requests.length);
  try {
    const sending = dispatch(
      requests,
      { dispatch: mode, speed: options.speed ?? d.speed, clock, stop: stopSending.signal },
      send,
    );
    await waitWithGrace(sending, stopSending.signal, options.grace ?? d.grace, client);
  } finally {
    clearTimeout(durationTimer);
    options.signal?.removeEventListener('abort', onSignal);
    await client.close();
    await engineLog?.stop();
    writer?.close();
  }
  return {
    sent: tally.sent,
    done: tally.done,
    errors: tally.errors,
    aborted: tally.aborted,
    stoppedBy,
    elapsed: tally.lastFinish,
    ttft: tally.ttft,
    tpot: tally.tpot,
    inputTokens: tally.inputTokens,
    cachedTokens: tally.cachedTokens,
    instances: instances.list(),
    model,
    lastError: tally.lastError,
    ...(traceStats === undefined ? {} : { traceStats }),
  };
}

/**
 * Resolves when `sending` does. Once `stopped` aborts, the in-flight requests get `grace`
 * seconds; then the client aborts them (each is then recorded as aborted) and this waits
 * for their records.
 */
async function waitWithGrace(
  sending: Promise<void>,
  stopped: AbortSignal,
  grace: number,
  client: TargetClient,
): Promise<void> {
  let graceTimer: NodeJS.Timeout | undefined;
  const onStop = (): void => {
    graceTimer = setTimeout(() => client.abortAll(new Error(`still running ${grace} s after the stop`)), grace * 1000);
  };
  if (stopped.aborted) onStop();
  else stopped.addEventListener('abort', onStop, { once: true });
  try {
    await sending;
  } finally {
    clearTimeout(graceTimer);
    stopped.removeEventListener('abort', onStop);
  }
}
