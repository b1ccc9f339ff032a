/**
 * Reads a Mooncake or session JSONL trace (plain or gzip) as a stream of TraceRequests in
 * arrival order, validating each line. Memory is bounded by the read-ahead and sort windows
 * (a few thousand lines) plus one small record per session, never by the file.
 *
 * The pipeline, in order:
 * 1. bytes (ByteSource: gzip sniffed, other encodings refused) → lines (BOM and blank lines
 *    dropped) → parsed, field-checked TraceLines (the format is detected on the first line);
 * 2. the first READ_AHEAD_LINES lines decide what the file does not state: the block size
 *    (BlockSizeInference) and whether the timestamps' unit is plausible (timeUnitWarning);
 * 3. each line is placed (block size, seconds, consistency checks, in file order) and sorted
 *    into arrival order within `reorderWindow` lines (ArrivalSort);
 * 4. in arrival order, sessions and turns are resolved and the request is handed on.
 *
 * Hard errors (a TraceFormatError naming the line and field, raised from the iterator):
 * malformed JSON, a missing or mistyped field, a negative length, non-increasing turns within
 * a session, a block size that changes mid-trace, lines that no single unstated block size fits,
 * a line too far out of order to sort, and an input with no requests (TraceEmptyError). Soft
 * problems are counted in `stats.warnings` and become hard errors under `strict`: `hash_ids`
 * whose length contradicts a stated block size, lines out of arrival order (sorted), a
 * `parent_chat_id` that names no earlier chat, and implausible timestamps for the unit.
 */
import { invalidValue, rangeError } from '../core/errors.js';
import { ArrivalSort } from './arrival-sort.js';
import { BlockSizeInference } from './block-size-inference.js';
import { ByteSource } from './byte-source.js';
import { readLines, type NumberedLine } from './line-reader.js';
import { SessionInference } from './session-inference.js';
import { timeUnitWarning } from './time-unit-check.js';
import { TraceEmptyError } from './trace-errors.js';
import { parseLineObject, traceLine, type TraceLine } from './trace-line.js';
import {
  DEFAULT_BLOCK_SIZE,
  TIME_UNITS,
  TRACE_FORMATS,
  type TimeUnit,
  type TraceFormat,
  type TraceRequest,
} from './types.js';
import type { LineFields } from './line-fields.js';

export interface ReadTraceOptions {
  /** 'auto' (default) picks `session` when the first line has `session_id` or `chat_id`. */
  format?: TraceFormat | 'auto';
  /** Tokens per block for lines without `block_size`; inferred from the lines when unset. */
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

export { TIME_UNITS, type TimeUnit } from './types.js';
export const REORDER_WINDOW_DEFAULT = 1024;
/** Lines read before the first request is handed on, to infer what the file does not state. */
export const READ_AHEAD_LINES = 4096;

/** The unit each format's `timestamp` is written in. */
export const DEFAULT_TIME_UNIT: Record<TraceFormat, TimeUnit> = { mooncake: 'ms', session: 's' };

export const WARNING_KINDS = ['hash_ids_length', 'arrival_order', 'orphan_parent', 'time_unit'] as const;
export type TraceWarningKind = (typeof WARNING_KINDS)[number];

export interface TraceReadStats {
  format: TraceFormat | undefined;
  blockSize: number | undefined;
  /** Lines read so far (blank lines included); runs ahead of `requests` by the read-ahead. */
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

const FORMAT_NAMES: Record<TraceFormat, string> = { mooncake: 'Mooncake', session: 'session' };

export class TraceReader implements AsyncIterable<TraceRequest> {
  readonly stats: TraceReadStats = {
    format: undefined,
    blockSize: undefined,
    lines: 0,
    requests: 0,
    sessions: 0,
    warnings: { hash_ids_length: 0, arrival_order: 0, orphan_parent: 0, time_unit: 0 },
    firstWarning: {},
    notes: [],
  };
  private readonly progress = new Map<string, SessionProgress>();
  private readonly chatSessions = new Map<number, string>();
  private readonly inference: SessionInference | undefined;
  private readonly bytes: ByteSource;
  private readonly source: string;
  private readonly reorderWindow: number;
  /** Set by `decide`: the block size of lines without `block_size`, and whether anything stated it. */
  private blockSize = 0;
  private blockSizeStated = false;
  private blockSizeLine = 0;
  private secondsPerUnit = 1;
  private latestArrival = -Infinity;
  private latestLine = 0;
  private started = false;

  constructor(
    private readonly path: string,
    private readonly options: ReadTraceOptions = {},
  ) {
    const format = options.format ?? 'auto';
    if (format !== 'auto' && !TRACE_FORMATS.includes(format))
      throw invalidValue('format', `one of auto, ${TRACE_FORMATS.join(', ')}`, format);
    if (options.blockSize !== undefined && !(Number.isSafeInteger(options.blockSize) && options.blockSize >= 1))
      throw invalidValue('blockSize', 'a positive integer', options.blockSize);
    if (options.timeUnit !== undefined && !TIME_UNITS.includes(options.timeUnit))
      throw invalidValue('timeUnit', `one of ${TIME_UNITS.join(', ')}`, options.timeUnit);
    if (
      options.reorderWindow !== undefined &&
      !(Number.isSafeInteger(options.reorderWindow) && options.reorderWindow >= 1)
    )
      throw invalidValue('reorderWindow', 'a positive integer', options.reorderWindow);
    if (options.inferSessions && format === 'session')
      throw invalidValue('inferSessions', 'used with Mooncake traces only (session traces carry sessions)', true);
    this.inference = options.inferSessions ? new SessionInference() : undefined;
    this.source = options.sourceName ?? (path === '-' ? 'stdin' : path);
    this.bytes = new ByteSource(path, this.source);
    this.reorderWindow = options.reorderWindow ?? REORDER_WINDOW_DEFAULT;
  }

  /** Bytes of the input consumed so far (compressed bytes for gzip): progress through the file. */
  get bytesRead(): number {
    return this.bytes.bytesRead;
  }

  /** The input's size in bytes, when it is a regular file; undefined for a pipe. */
  get totalBytes(): number | undefined {
    return this.bytes.totalBytes;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<TraceRequest> {
    if (this.started) throw new Error('a TraceReader is iterated once; open the file again to re-read it');
    this.started = true;
    const lines = readLines(this.bytes.chunks());
    try {
      const ahead: TraceLine[] = [];
      while (ahead.length < READ_AHEAD_LINES) {
        const next = await lines.next();
        if (next.done) break;
        ahead.push(this.parse(next.value));
      }
      if (ahead.length === 0) throw new TraceEmptyError(this.source, this.bytes.bytesRead > 0);
      this.decide(ahead);
      const sort = new ArrivalSort<TraceLine>(this.reorderWindow);
      for (const line of ahead) {
        this.admit(line, sort);
        const ready = sort.pop();
        if (ready !== undefined) yield this.finish(ready);
      }
      ahead.length = 0;
      for (let next = await lines.next(); !next.done; next = await lines.next()) {
        this.admit(this.parse(next.value), sort);
        const ready = sort.pop();
        if (ready !== undefined) yield this.finish(ready);
      }
      for (let ready = sort.pop(true); ready !== undefined; ready = sort.pop(true)) yield this.finish(ready);
    } finally {
      await lines.return(undefined);
    }
  }

  /** One line, parsed and field-checked; the format is fixed by the first. */
  private parse({ line, text }: NumberedLine): TraceLine {
    this.stats.lines = line;
    const fields = parseLineObject(text, line, this.source);
    const format = (this.stats.format ??= this.detect(fields));
    return traceLine(fields, format);
  }

  private detect(fields: LineFields): TraceFormat {
    const sessionLike = fields.has('session_id') || fields.has('chat_id');
    const key = fields.has('session_id') ? 'session_id' : 'chat_id';
    const format = this.options.format ?? 'auto';
    if (format === 'mooncake' && sessionLike)
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        `format mooncake: ${this.source} is a session trace (line ${fields.line} has ${key}); read as Mooncake its sessions would be dropped and its timestamps taken as milliseconds. Use --format session (or auto), or convert it with kvroute trace transform --to mooncake`,
      );
    const detected = format !== 'auto' ? format : sessionLike ? 'session' : 'mooncake';
    if (this.options.inferSessions && detected === 'session')
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        `inferSessions (--infer-sessions): ${this.source} is a session trace (line ${fields.line} has ${key}), whose sessions are in the file; session inference applies to Mooncake traces only`,
      );
    return detected;
  }

  /** What the lines read ahead say about the block size and the time unit. */
  private decide(ahead: readonly TraceLine[]): void {
    const format = this.stats.format!;
    const name = FORMAT_NAMES[format];
    const unit = this.options.timeUnit ?? DEFAULT_TIME_UNIT[format];
    this.secondsPerUnit = unit === 'ms' ? 1000 : 1;
    // Lines without block_size take --block-size, else the first line's block_size, else the
    // size inferred from the other lines without one.
    const stated = this.options.blockSize ?? ahead[0]!.blockSizeField;
    if (stated !== undefined) {
      this.blockSize = stated;
      this.blockSizeStated = true;
    } else {
      const inference = new BlockSizeInference(this.source);
      for (const line of ahead)
        if (line.blockSizeField === undefined) inference.add(line.line, line.inputLength, line.hashIds.length);
      const decision = inference.decide(DEFAULT_BLOCK_SIZE[format], name);
      this.blockSize = decision.size;
      if (decision.note !== undefined) this.stats.notes.push(decision.note);
    }
    if (this.options.timeUnit === undefined) {
      const warning = timeUnitWarning(ahead, unit, name);
      if (warning !== undefined) this.warn(ahead[0]!.fields, 'time_unit', warning, 'timestamp');
    }
  }

  /** Block size, seconds and the per-line checks, in file order; then into the sort. */
  private admit(line: TraceLine, sort: ArrivalSort<TraceLine>): void {
    const { fields } = line;
    line.blockSize = line.blockSizeField ?? this.blockSize;
    if (this.stats.blockSize === undefined) {
      this.stats.blockSize = line.blockSize;
      this.blockSizeLine = line.line;
    } else if (line.blockSize !== this.stats.blockSize) {
      fields.fail(
        'block_size',
        `${line.blockSize} differs from the trace's ${this.stats.blockSize} (line ${this.blockSizeLine})`,
      );
    }
    const expected = Math.ceil(line.inputLength / line.blockSize);
    if (line.hashIds.length !== expected) {
      const mismatch = `has ${line.hashIds.length} ids, but input_length ${line.inputLength} at block size ${line.blockSize} needs ${expected}`;
      if (!this.blockSizeStated && line.blockSizeField === undefined)
        fields.fail(
          'hash_ids',
          `${mismatch}. The block size ${line.blockSize} is not stated but was inferred from lines 1–${Math.min(this.stats.lines, READ_AHEAD_LINES)}, and this line does not fit it: the lines disagree. Give --block-size B (lines that do not fit it are then counted as hash_ids_length warnings)`,
        );
      this.warn(fields, 'hash_ids_length', mismatch, 'hash_ids');
    }
    line.arrival = line.timestamp / this.secondsPerUnit;
    if (line.arrival < this.latestArrival)
      this.warn(
        fields,
        'arrival_order',
        `goes back in time (${line.arrival} s after ${this.latestArrival} s on line ${this.latestLine}); sorted into arrival order`,
        'timestamp',
      );
    else {
      this.latestArrival = line.arrival;
      this.latestLine = line.line;
    }
    if (!sort.push(line)) {
      const released = sort.released!;
      fields.fail(
        'timestamp',
        `${line.arrival} s is earlier than line ${released.line} (${released.arrival} s), which was already handed on: this line is more than ${this.reorderWindow} lines out of arrival order, beyond what kvroute sorts in memory. Sort the file by timestamp first, or raise --reorder-window (memory grows with it)`,
      );
    }
  }

  /** Session and turn, in arrival order. */
  private finish(line: TraceLine): TraceRequest {
    const { fields, arrival, inputLength, outputLength, hashIds, blockSize } = line;
    let request: TraceRequest;
    if (this.stats.format === 'mooncake') {
      if (this.inference === undefined) {
        const session = `r${this.stats.requests}`;
        request = { session, turn: 1, arrival, inputLength, outputLength, hashIds, blockSize, sessionless: true };
      } else {
        const session = `m${this.inference.assign(hashIds)}`;
        const turn = (this.progress.get(session)?.turn ?? 0) + 1;
        request = { session, turn, arrival, inputLength, outputLength, hashIds, blockSize };
      }
    } else {
      const session = line.sessionId ?? this.sessionFromChain(fields, line.chatId!, line.parentChatId);
      const turn = line.turn ?? (this.progress.get(session)?.turn ?? 0) + 1;
      request = { session, turn, arrival, inputLength, outputLength, hashIds, blockSize };
      if (line.chatId !== undefined) request.chatId = line.chatId;
      if (line.parentChatId !== undefined) request.parentChatId = line.parentChatId;
    }
    if (line.tenant !== undefined) request.tenant = line.tenant;
    if (line.priority !== undefined) request.priority = line.priority;
    this.stats.requests++;
    if (request.sessionless) this.stats.sessions = this.stats.requests;
    else this.advanceTurn(fields, request);
    return request;
  }

  /** Bailian traces: a root chat (`parent_chat_id` -1 or absent) starts a session named after it. */
  private sessionFromChain(fields: LineFields, chatId: number, parent: number | undefined): string {
    let session = parent === undefined || parent < 0 ? undefined : this.chatSessions.get(parent);
    if (session === undefined && parent !== undefined && parent >= 0)
      this.warn(fields, 'orphan_parent', `parent_chat_id ${parent} names no earlier chat_id; starting a session`);
    session ??= String(chatId);
    this.chatSessions.set(chatId, session);
    return session;
  }

  private advanceTurn(fields: LineFields, request: TraceRequest): void {
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
    this.stats.sessions = this.progress.size;
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
