/**
 * One replayed request over HTTP: a streamed `/v1/completions` call built from a trace request,
 * timed and turned into a RequestRecord, whatever happens to it.
 *
 * Body: `prompt` (BlockText of the block ids), `max_tokens` = the trace's output length,
 * `ignore_eos` (unless disabled: engines that reject unknown fields), `stream` with
 * `include_usage`, and kvroute's extension fields `hash_ids` (the proxy routes on them, the
 * simulated engine caches by them) and `input_tokens` (the trace's prompt length, which the
 * simulated engine takes as is). Header `x-session-id` = the trace session; `x-kvroute-tenant` and
 * `x-kvroute-priority` = its tenant and class, when the trace gives them (records carry them too).
 *
 * HTTP: an undici Pool per target (keep-alive, `connections` sockets, no pipelining).
 *
 * Invariants:
 * - send() never rejects: a refused connection, a 4xx/5xx, a cut or errored stream and an abort
 *   all become a record with `status` (0 when no HTTP response came) and `error`.
 * - Times are seconds on the replay clock (performance.now() − origin); `first_token` is the
 *   first token chunk's arrival, or `finish` when none came.
 * - `instance`: the index of the response's `x-kvroute-instance` in InstanceIndex (a proxy); 0
 *   for a response without it (a plain engine); -1 when no response came.
 * - `predicted_cached_tokens`: the response's `x-kvroute-predicted-cached-tokens` (a proxy); null
 *   without it, or when it is not a decimal count (a target's bad header never fails a request).
 */
import { Pool } from 'undici';

import type { RequestRecord } from '../trace/records.js';
import type { TraceRequest } from '../trace/types.js';
import type { BlockText } from './block-text.js';
import { SseReader } from './sse.js';

/** Seconds a request may wait for headers, or between body bytes (a long prefill is silent). */
const REQUEST_TIMEOUT_MS = 600_000;
/** Characters of an error body kept for the record's message (at most 16 chunks are kept). */
const ERROR_BODY_BYTES = 2048;
/** The proxy's prediction of the response's cached tokens (docs/proxy.md). */
const PREDICTED_HEADER = 'x-kvroute-predicted-cached-tokens';

/** x-kvroute-instance values (backend URLs) → stable indices, first seen first (or as seeded). */
export class InstanceIndex {
  private readonly ids = new Map<string, number>();

  constructor(seed: readonly string[] = []) {
    for (const id of seed) this.of(id);
  }

  of(id: string): number {
    let index = this.ids.get(id);
    if (index === undefined) {
      index = this.ids.size;
      this.ids.set(id, index);
    }
    return index;
  }

  /** The ids in index order. */
  list(): string[] {
    return [...this.ids.keys()];
  }
}

export interface TargetClientOptions {
  /** Base URL: `http://host:port` (a path prefix is kept). */
  target: string;
  model: string;
  text: BlockText;
  connections: number;
  ignoreEos: boolean;
  /**
   * Send kvroute's extensions `hash_ids` and `input_tokens`; false leaves the target to key the
   * request by its prompt (kvroute serve: text chunks, or tokens with a tokenizer).
   */
  sendHashIds?: boolean;
  /** performance.now() at the replay's start: time 0 of the records. */
  origin: number;
  instances: InstanceIndex;
}

export class TargetClient {
  private readonly pool: Pool;
  private readonly path: string;
  /** Abort functions of the requests on a socket now. */
  private readonly inFlight = new Set<(error: Error) => void>();
  /** Set by abortAll(): requests reaching a socket later are aborted at once. */
  private stopReason: Error | undefined;

  constructor(private readonly options: TargetClientOptions) {
    const url = new URL(options.target);
    this.path = `${url.pathname.replace(/\/+$/, '')}/v1/completions`;
    this.pool = new Pool(url.origin, {
      connections: options.connections,
      pipelining: 1,
      headersTimeout: REQUEST_TIMEOUT_MS,
      bodyTimeout: REQUEST_TIMEOUT_MS,
    });
  }

  /** The request body (exported for the tests and the bench). */
  body(request: TraceRequest): string {
    const o = this.options;
    return JSON.stringify({
      model: o.model,
      prompt: o.text.prompt(request.hashIds, request.inputLength),
      max_tokens: request.outputLength,
      ...(o.ignoreEos ? { ignore_eos: true } : {}),
      stream: true,
      stream_options: { include_usage: true },
      ...(o.sendHashIds === false ? {} : { hash_ids: request.hashIds, input_tokens: request.inputLength }),
    });
  }

  /**
   * Sends `request` and resolves with its record (never rejects; see the header). Uses undici's
   * dispatch() with a handler: no stream or async iterator per request (a third of the driver's
   * CPU per request with `pool.request`).
   */
  send(request: TraceRequest): Promise<RequestRecord> {
    const clock = (): number => (performance.now() - this.options.origin) / 1000;
    const body = this.body(request);
    const dispatch = clock();
    const record: RequestRecord = {
      session: request.session,
      turn: request.turn,
      instance: -1,
      dispatch,
      first_token: dispatch,
      finish: dispatch,
      input_tokens: request.inputLength,
      cached_tokens: 0,
      output_tokens: 0,
      overlapped: false,
      preemptions: 0,
      predicted_cached_tokens: null,
      status: 0,
      ...(request.tenant === undefined ? {} : { tenant: request.tenant }),
      ...(request.priority === undefined ? {} : { priority: request.priority }),
    };
    const sse = new SseReader();
    let errorBody: Buffer[] | undefined;
    let abort: ((error: Error) => void) | undefined;
    return new Promise<RequestRecord>((resolve) => {
      const settle = (error?: Error): void => {
        if (abort !== undefined) this.inFlight.delete(abort);
        if (error !== undefined) record.error = failure(error, this.stopReason);
        else if (errorBody !== undefined)
          record.error = `HTTP ${record.status}: ${errorText(Buffer.concat(errorBody).toString('utf8'))}`;
        else {
          sse.end();
          if (sse.error !== undefined) record.error = `stream error: ${sse.error}`;
          else if (!sse.done) record.error = 'stream ended before data: [DONE]';
        }
        this.finishRecord(record, sse, clock());
        resolve(record);
      };
      this.pool.dispatch(
        {
          path: this.path,
          method: 'POST',
          headers: requestHeaders(request),
          body,
        },
        {
          onConnect: (abortRequest) => {
            abort = abortRequest;
            if (this.stopReason !== undefined) return abortRequest(this.stopReason);
            this.inFlight.add(abortRequest);
          },
          onHeaders: (status, headers) => {
            record.status = status;
            record.instance = 0;
            for (let i = 0; i + 1 < headers.length; i += 2) {
              const name = headers[i]!.toString('latin1').toLowerCase();
              if (name === 'x-kvroute-instance')
                record.instance = this.options.instances.of(headers[i + 1]!.toString('latin1'));
              else if (name === 'x-kvroute-reason') record.reason = headers[i + 1]!.toString('latin1');
              else if (name === PREDICTED_HEADER)
                record.predicted_cached_tokens = tokenCount(headers[i + 1]!.toString('latin1'));
            }
            if (status !== 200) errorBody = [];
            return true;
          },
          onData: (chunk) => {
            if (errorBody === undefined) sse.push(chunk);
            else if (errorBody.length < 16) errorBody.push(Buffer.from(chunk));
            return true;
          },
          onComplete: () => settle(),
          onError: (error) => settle(error),
        },
      );
    });
  }

  /**
   * Aborts every request in flight and every one still queued for a socket: each is recorded
   * with `aborted: ${reason.message}`.
   */
  abortAll(reason: Error): void {
    this.stopReason = reason;
    for (const abort of this.inFlight) abort(reason);
    this.inFlight.clear();
  }

  private finishRecord(record: RequestRecord, sse: SseReader, finish: number): void {
    record.finish = finish;
    record.first_token = sse.firstTokenAt === undefined ? finish : (sse.firstTokenAt - this.options.origin) / 1000;
    const usage = sse.usage;
    if (usage !== undefined) {
      if (isCount(usage.prompt_tokens)) record.input_tokens = usage.prompt_tokens;
      const cached = usage.prompt_tokens_details?.cached_tokens;
      if (isCount(cached)) record.cached_tokens = cached;
    }
    record.output_tokens = isCount(usage?.completion_tokens) ? usage.completion_tokens : sse.tokenChunks;
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}

/** A header's decimal token count, or null for anything else (the record then has no prediction). */
function tokenCount(text: string): number | null {
  if (!/^\d{1,15}$/.test(text)) return null;
  return Number(text);
}

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** The start of an error body, its `error.message` when it is OpenAI's error JSON. */
function errorText(body: string): string {
  const text = body.slice(0, ERROR_BODY_BYTES);
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown } | string; message?: unknown };
    const message = typeof parsed.error === 'object' ? parsed.error?.message : (parsed.error ?? parsed.message);
    if (typeof message === 'string') return message;
  } catch {
    // not JSON: the text as is
  }
  return text.trim() || '(empty body)';
}

/** Why a request failed without a whole response: a connection error, a cut stream, an abort. */
function failure(error: unknown, stopped: Error | undefined): string {
  if (stopped !== undefined) return `aborted: ${stopped.message}`;
  const e = error as { code?: string; message?: string };
  return `${e.code ?? 'error'}: ${e.message ?? String(error)}`;
}

/** A failure before any HTTP response: what a dead target gives. */
export function isConnectionFailure(record: RequestRecord): boolean {
  return record.status === 0 && record.error !== undefined && !record.error.startsWith('aborted');
}

/**
 * The trace request's headers: its session, and its tenant and class when it has them (flow
 * control's headers: docs/flow-control.md), so a replay through kvroute is queued as the trace says.
 */
function requestHeaders(request: TraceRequest): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-session-id': request.session };
  if (request.tenant !== undefined) headers['x-kvroute-tenant'] = request.tenant;
  if (request.priority !== undefined) headers['x-kvroute-priority'] = request.priority;
  return headers;
}
