/**
 * Record files: a RunHeader, then a run's RequestRecords, as a stream of MessagePack values
 * (msgpackr, with its record extension so field names are written once; `sequential` embeds
 * each structure before its first use, so a file decodes on its own). See docs/records.md.
 *
 * Two ways to write:
 * - `writeRecords` (a finished run, the simulator's): atomically, to a temporary name beside the
 *   target renamed after the last record, so a failure leaves no partial file.
 * - `RecordWriter` (a live run, the replayer's): appended in batches as requests finish, so that
 *   a run stopped by Ctrl-C, SIGTERM or a crash leaves every record written so far. A process
 *   killed mid-batch can leave a truncated last value: readers detect and report it.
 *
 * `readRecordFile` validates what it reads: a file that is not records, or a record with a bad
 * field, is a RecordFileError naming the file, the record and the field.
 */
import { closeSync, openSync, readFileSync, renameSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Packr, unpackMultiple } from 'msgpackr';

import { describe, type KvrouteError } from '../core/errors.js';
import { ioError } from './trace-errors.js';
import { RECORDS_FORMAT, RECORDS_VERSION, type RequestRecord, type RunHeader } from './records.js';

const RECORDS_PER_CHUNK = 4096;

function packer(): Packr {
  return new Packr({ useRecords: true, sequential: true });
}

/** Writes `header` and `records` to `path` atomically. */
export function writeRecords(path: string, records: readonly RequestRecord[], header?: RunHeader): void {
  const packr = packer();
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    writeFileSync(temporary, header === undefined ? '' : packr.pack(header), { flag: 'wx' });
    for (let at = 0; at < records.length; at += RECORDS_PER_CHUNK) {
      const chunk = records.slice(at, at + RECORDS_PER_CHUNK).map((record) => packr.pack(record));
      writeFileSync(temporary, Buffer.concat(chunk), { flag: 'a' });
    }
    renameSync(temporary, path);
  } catch (error) {
    rmSync(temporary, { force: true });
    throw ioError(path, error);
  }
}

/**
 * Appends records to `path` as they come, in batches of `batch` (or on `flush`). The file is
 * created (replaced) with the header at once, so even a run that sends nothing leaves a file
 * naming itself. Writes are synchronous: a batch is on disk before `write` returns from it.
 */
export class RecordWriter {
  private readonly packr = packer();
  private readonly fd: number;
  private pending: Buffer[] = [];
  written = 0;

  constructor(
    private readonly path: string,
    header: RunHeader,
    private readonly batch = 256,
  ) {
    try {
      this.fd = openSync(path, 'w');
      writeSync(this.fd, this.packr.pack(header));
    } catch (error) {
      throw ioError(path, error);
    }
  }

  write(record: RequestRecord): void {
    this.pending.push(this.packr.pack(record));
    if (this.pending.length >= this.batch) this.flush();
  }

  flush(): void {
    if (this.pending.length === 0) return;
    const bytes = Buffer.concat(this.pending);
    this.written += this.pending.length;
    this.pending = [];
    try {
      writeSync(this.fd, bytes);
    } catch (error) {
      throw ioError(this.path, error);
    }
  }

  close(): void {
    this.flush();
    closeSync(this.fd);
  }
}

/** A record file that is not one, or holds a bad record: names the file, the record and the field. */
export class RecordFileError extends Error implements KvrouteError {
  readonly code = 'ERR_KVROUTE_RECORDS' as const;
  constructor(path: string, reason: string) {
    super(`${path}: ${reason}`);
    this.name = 'RecordFileError';
  }
}

export interface RecordFile {
  /** Absent in files written before headers (kvroute 0.1 `sim run --records`). */
  header: RunHeader | undefined;
  records: RequestRecord[];
  /** Set when the file ends inside a value: the bytes after the last whole record. */
  truncated: { at: number; bytes: number } | undefined;
}

const NUMBER_FIELDS = ['dispatch', 'first_token', 'finish'] as const;
const COUNT_FIELDS = ['turn', 'input_tokens', 'cached_tokens', 'output_tokens', 'preemptions'] as const;
/** Optional: present on offloaded requests only, and `replica` on runs of several router replicas. */
const OPTIONAL_COUNT_FIELDS = ['prefill_instance', 'decode_cached_tokens', 'transferred_tokens', 'replica'] as const;

function checkRecord(path: string, index: number, value: unknown): RequestRecord {
  const fail = (field: string | undefined, reason: string): never => {
    throw new RecordFileError(path, `record ${index + 1}: ${field === undefined ? '' : `${field}: `}${reason}`);
  };
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    fail(undefined, `expected a request record (a map), got ${describe(value)}`);
  const r = value as Record<string, unknown>;
  if (typeof r.session !== 'string') fail('session', `must be a string, got ${describe(r.session)}`);
  if (!Number.isSafeInteger(r.instance)) fail('instance', `must be an integer, got ${describe(r.instance)}`);
  for (const field of NUMBER_FIELDS)
    if (typeof r[field] !== 'number' || !Number.isFinite(r[field]))
      fail(field, `must be a finite number, got ${describe(r[field])}`);
  for (const field of COUNT_FIELDS)
    if (!Number.isSafeInteger(r[field]) || (r[field] as number) < 0)
      fail(field, `must be a non-negative integer, got ${describe(r[field])}`);
  if (typeof r.overlapped !== 'boolean') fail('overlapped', `must be true or false, got ${describe(r.overlapped)}`);
  for (const field of OPTIONAL_COUNT_FIELDS)
    if (r[field] !== undefined && (!Number.isSafeInteger(r[field]) || (r[field] as number) < 0))
      fail(field, `must be a non-negative integer, got ${describe(r[field])}`);
  if (
    r.transfer_s !== undefined &&
    !(typeof r.transfer_s === 'number' && Number.isFinite(r.transfer_s) && r.transfer_s >= 0)
  )
    fail('transfer_s', `must be a finite number ≥ 0, got ${describe(r.transfer_s)}`);
  if (r.queued_s !== undefined && !(typeof r.queued_s === 'number' && Number.isFinite(r.queued_s) && r.queued_s >= 0))
    fail('queued_s', `must be a finite number ≥ 0, got ${describe(r.queued_s)}`);
  for (const field of ['tenant', 'priority'] as const)
    if (r[field] !== undefined && typeof r[field] !== 'string')
      fail(field, `must be a string, got ${describe(r[field])}`);
  const predicted = r.predicted_cached_tokens;
  if (predicted !== undefined && predicted !== null && (!Number.isSafeInteger(predicted) || (predicted as number) < 0))
    fail('predicted_cached_tokens', `must be a non-negative integer or null, got ${describe(predicted)}`);
  return r as unknown as RequestRecord;
}

function isHeader(value: unknown): value is RunHeader {
  return typeof value === 'object' && value !== null && (value as { format?: unknown }).format === RECORDS_FORMAT;
}

/** Reads and checks a whole record file. A truncated last value is reported in `truncated`. */
export function readRecordFile(path: string): RecordFile {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw ioError(path, error);
  }
  const values: unknown[] = [];
  let truncated: RecordFile['truncated'];
  try {
    if (bytes.length > 0) unpackMultiple(bytes, (value) => void values.push(value));
  } catch (error) {
    const at = (error as { lastPosition?: number }).lastPosition;
    if ((error as { incomplete?: boolean }).incomplete !== true || at === undefined)
      throw new RecordFileError(
        path,
        `record ${values.length}: not MessagePack this reader can decode (${(error as Error).message}); is it a record file?`,
      );
    truncated = { at, bytes: bytes.length - at };
  }
  let header: RunHeader | undefined;
  let first = 0;
  if (isHeader(values[0])) {
    header = values[0];
    first = 1;
    if (header.version > RECORDS_VERSION)
      throw new RecordFileError(
        path,
        `record file version ${header.version} is newer than this kvroute reads (${RECORDS_VERSION}); upgrade kvroute`,
      );
  } else if (values.length > 0 && (typeof values[0] !== 'object' || values[0] === null || !('session' in values[0])))
    throw new RecordFileError(
      path,
      `not a kvroute record file: its first value is ${describe(values[0])}, not a run header or a request record (record files are written by sim run --records and replay --records; is this a trace?)`,
    );
  const records = new Array<RequestRecord>(values.length - first);
  for (let i = first; i < values.length; i++) records[i - first] = checkRecord(path, i - first, values[i]);
  return { header, records, truncated };
}

/** The records of a file, for callers that need neither header nor truncation (tests, tools). */
export function readRecords(path: string): RequestRecord[] {
  return readRecordFile(path).records;
}
