/**
 * Record files: a run's RequestRecords as a stream of MessagePack values (msgpackr, with its
 * record extension so the field names are written once). Written atomically like traces: to a
 * temporary name beside the target, renamed after the last record.
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Packr, unpackMultiple } from 'msgpackr';

import { ioError } from './trace-errors.js';
import type { RequestRecord } from './records.js';

const RECORDS_PER_CHUNK = 4096;

export function writeRecords(path: string, records: readonly RequestRecord[]): void {
  const packr = new Packr({ useRecords: true, sequential: true });
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  try {
    writeFileSync(temporary, '', { flag: 'wx' });
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

export function readRecords(path: string): RequestRecord[] {
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (error) {
    throw ioError(path, error);
  }
  return bytes.length === 0 ? [] : (unpackMultiple(bytes) as RequestRecord[]);
}
