/**
 * Reads a Mooncake or session JSONL trace as a stream of TraceRequests, validating each line.
 * Memory is bounded by the number of sessions (one small record each), never by the file:
 * lines are parsed one at a time and handed on.
 *
 * Hard errors (a TraceFormatError naming the line and field, raised from the iterator):
 * malformed JSON, a missing or mistyped field, a negative length, non-increasing turns within
 * a session, a block size that changes mid-trace. Soft problems are counted in `stats.warnings`
 * and become hard errors under `strict`: `hash_ids` whose length contradicts `input_length`,
 * arrivals that go backwards, and a `parent_chat_id` that names no earlier chat.
 */
import { statSync } from 'node:fs';

import { LineFields, type JsonObject } from './line-fields.js';
import { readLines, type ByteCounter } from './line-reader.js';
import { SessionInference } from './session-inference.js';
import { invalidValue } from '../core/errors.js';
import { DEFAULT_BLOCK_SIZE, TRACE_FORMATS, type TraceFormat, type TraceRequest } from './types.js';

export interface ReadTraceOptions {
  /** 'auto' (default) picks `session` when the first line has `session_id` or `chat_id`. */
  format?: TraceFormat | 'auto';
  /** Tokens per block for lines without `block_size`; defaults to the format's (512 / 16). */
  blockSize?: number;
  /** Turn counted warnings into errors. */
  strict?: boolean;
  /** Mooncake only: rebuild sessions from `hash_ids` extension (see SessionInference). */
  inferSessions?: boolean;
  /** Name used in error messages; defaults to the path. */
  sourceName?: string;
  /** The unit of `timestamp`; defaults to the format's (Mooncake ms, session s). */
  timeUnit?: TimeUnit;
  /** Lines held to sort a trace into arrival order (default REORDER_WINDOW_DEFAULT). */
  reorderWindow?: number;
}

export const TIME_UNITS = ['s', 'ms'] as const;
export type TimeUnit = (typeof TIME_UNITS)[number];
export const REORDER_WINDOW_DEFAULT = 65_536;

export const WARNING_KINDS = ['hash_ids_length', 'arrival_order', 'orphan_parent'] as const;
export type TraceWarningKind = (typeof WARNING_KINDS)[number];

export interface TraceReadStats {
  format: TraceFormat | undefined;
  blockSize: number | undefined;
  lines: number;
  requests: number;
  sessions: number;
  warnings: Record<TraceWarningKind, number>;
  /** The first occurrence of each warning, as a message with its line number. */
  firstWarning: Partial<Record<TraceWarningKind, string>>;
  /** What the reader inferred and the user should know (a block size, a time unit), one line each. */
  notes: string[];
}

interface SessionProgress {
  turn: number;
  line: number;
}

export class TraceReader implements AsyncIterable<TraceRequest> {
  readonly stats: TraceReadStats = {
    format: undefined,
    blockSize: undefined,
    lines: 0,
    requests: 0,
    sessions: 0,
    warnings: { hash_ids_length: 0, arrival_order: 0, orphan_parent: 0 },
    firstWarning: {},
    notes: [],
  };
  private readonly progress = new Map<string, SessionProgress>();
  private readonly chatSessions = new Map<number, string>();
  private readonly inference: SessionInference | undefined;
  private lastArrival = 0;
  private blockSizeLine = 0;
  private started = false;
  private readonly source: string;
  private readonly consumed: ByteCounter = { bytes: 0 };
  private size: number | null | undefined;

  constructor(
    private readonly path: string,
    private readonly options: ReadTraceOptions = {},
  ) {
    const format = options.format ?? 'auto';
    if (format !== 'auto' && !TRACE_FORMATS.includes(format))
      throw invalidValue('format', `one of auto, ${TRACE_FORMATS.join(', ')}`, format);
    if (options.blockSize !== undefined && !(Number.isSafeInteger(options.blockSize) && options.blockSize >= 1))
      throw invalidValue('blockSize', 'a positive integer', options.blockSize);
    if (options.inferSessions && format === 'session')
      throw invalidValue('inferSessions', 'used with Mooncake traces only (session traces carry sessions)', true);
    this.inference = options.inferSessions ? new SessionInference() : undefined;
    this.source = options.sourceName ?? (path === '-' ? 'stdin' : path);
  }

  /** Bytes of the input consumed so far (a read chunk at a time); for progress reports. */
  get bytesRead(): number {
    return this.consumed.bytes;
  }

  /**
   * The input file's size in bytes, or undefined when it has none up front (stdin, a pipe) or
   * cannot be stat'ed (iterating reports that error). Stat'ed once, on first use.
   */
  get totalBytes(): number | undefined {
    if (this.size === undefined) {
      try {
        const stats = this.path === '-' ? undefined : statSync(this.path);
        this.size = stats?.isFile() ? stats.size : null;
      } catch {
        this.size = null;
      }
    }
    return this.size ?? undefined;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<TraceRequest> {
    if (this.started) throw new Error('a TraceReader is iterated once; open the file again to re-read it');
    this.started = true;
    for await (const { line, text } of readLines(this.path, this.consumed)) {
      this.stats.lines = line;
      let object: unknown;
      try {
        object = JSON.parse(text);
      } catch (error) {
        new LineFields({}, line, this.source).fail(undefined, `malformed JSON (${(error as Error).message})`);
      }
      if (typeof object !== 'object' || object === null || Array.isArray(object))
        new LineFields({}, line, this.source).fail(undefined, 'expected a JSON object');
      const fields = new LineFields(object as JsonObject, line, this.source);
      const format = (this.stats.format ??= this.detect(fields));
      const request = format === 'mooncake' ? this.mooncake(fields) : this.session(fields);
      this.check(fields, request);
      this.stats.requests++;
      this.stats.sessions = request.sessionless ? this.stats.requests : this.progress.size;
      yield request;
    }
  }

  private detect(fields: LineFields): TraceFormat {
    const format = this.options.format ?? 'auto';
    if (format !== 'auto') return format;
    if (this.options.inferSessions) return 'mooncake';
    return fields.has('session_id') || fields.has('chat_id') ? 'session' : 'mooncake';
  }

  private blockSize(fields: LineFields, format: TraceFormat): number {
    const size = fields.optionalCount('block_size', 1) ?? this.options.blockSize ?? DEFAULT_BLOCK_SIZE[format];
    if (this.stats.blockSize === undefined) {
      this.stats.blockSize = size;
      this.blockSizeLine = fields.line;
    } else if (size !== this.stats.blockSize) {
      fields.fail(
        'block_size',
        `${size} differs from the trace's ${this.stats.blockSize} (line ${this.blockSizeLine})`,
      );
    }
    return size;
  }

  private mooncake(fields: LineFields): TraceRequest {
    const arrival = fields.time('timestamp') / 1000;
    const inputLength = fields.count('input_length');
    const outputLength = fields.count('output_length');
    const hashIds = fields.hashIds('hash_ids');
    const blockSize = this.blockSize(fields, 'mooncake');
    if (this.inference === undefined) {
      const session = `r${this.stats.requests}`;
      return { session, turn: 1, arrival, inputLength, outputLength, hashIds, blockSize, sessionless: true };
    }
    const session = `m${this.inference.assign(hashIds)}`;
    const turn = (this.progress.get(session)?.turn ?? 0) + 1;
    return { session, turn, arrival, inputLength, outputLength, hashIds, blockSize };
  }

  private session(fields: LineFields): TraceRequest {
    const arrival = fields.time('timestamp');
    const inputLength = fields.count('input_length');
    const outputLength = fields.count('output_length');
    const hashIds = fields.hashIds('hash_ids');
    const blockSize = this.blockSize(fields, 'session');
    const chatId = fields.optionalId('chat_id');
    const parentChatId = fields.optionalId('parent_chat_id');
    const session = fields.optionalName('session_id') ?? this.sessionFromChain(fields, chatId, parentChatId);
    const turn = fields.optionalCount('turn', 0) ?? (this.progress.get(session)?.turn ?? 0) + 1;
    const request: TraceRequest = { session, turn, arrival, inputLength, outputLength, hashIds, blockSize };
    if (chatId !== undefined) request.chatId = chatId;
    if (parentChatId !== undefined) request.parentChatId = parentChatId;
    return request;
  }

  /** Bailian traces: a root chat (`parent_chat_id` -1 or absent) starts a session named after it. */
  private sessionFromChain(fields: LineFields, chatId: number | undefined, parent: number | undefined): string {
    if (chatId === undefined)
      fields.fail('session_id', 'missing field (a session trace needs session_id, or chat_id and parent_chat_id)');
    let session = parent === undefined || parent < 0 ? undefined : this.chatSessions.get(parent);
    if (session === undefined && parent !== undefined && parent >= 0)
      this.warn(fields, 'orphan_parent', `parent_chat_id ${parent} names no earlier chat_id; starting a session`);
    session ??= String(chatId);
    this.chatSessions.set(chatId, session);
    return session;
  }

  private check(fields: LineFields, request: TraceRequest): void {
    const expected = Math.ceil(request.inputLength / request.blockSize);
    if (request.hashIds.length !== expected)
      this.warn(
        fields,
        'hash_ids_length',
        `has ${request.hashIds.length} ids, but input_length ${request.inputLength} at block size ${request.blockSize} needs ${expected}`,
        'hash_ids',
      );
    if (request.arrival < this.lastArrival)
      this.warn(
        fields,
        'arrival_order',
        `goes back in time (${request.arrival} s after ${this.lastArrival} s)`,
        'timestamp',
      );
    else this.lastArrival = request.arrival;
    if (request.sessionless) return;
    const last = this.progress.get(request.session);
    if (last !== undefined && request.turn <= last.turn)
      fields.fail(
        'turn',
        `${request.turn} does not follow turn ${last.turn} (line ${last.line}) of session ${JSON.stringify(request.session)}; turns must increase within a session`,
      );
    if (last === undefined) this.progress.set(request.session, { turn: request.turn, line: fields.line });
    else {
      last.turn = request.turn;
      last.line = fields.line;
    }
  }

  private warn(fields: LineFields, kind: TraceWarningKind, message: string, field?: string): void {
    if (this.options.strict) fields.fail(field, `${message} (strict)`);
    this.stats.warnings[kind]++;
    this.stats.firstWarning[kind] ??=
      `${this.source}:line ${fields.line}: ${field === undefined ? '' : `${field}: `}${message}`;
  }
}

/** Opens `path` ('-' for stdin) for one streaming pass. */
export function readTrace(path: string, options?: ReadTraceOptions): TraceReader {
  return new TraceReader(path, options);
}
