/**
 * Property-based fuzzing (fast-check) of the record file reader (src/trace/record-file.ts,
 * records.ts), which reads what a run left behind, possibly cut short by a crash:
 *   - arbitrary bytes, and valid files with bytes flipped: records (each field-checked) or a
 *     RecordFileError naming the file, never another error;
 *   - a valid file (a header and random records, as writeRecords writes it) cut at any offset:
 *     exactly the header and records wholly before the cut, with the cut reported as `truncated`
 *     (where the last whole value ends, and the bytes after it) unless it falls between two
 *     values: a half-read value is never returned, nor silently dropped.
 * Budget: test/helpers/property-budget.ts (fixed seed and runs; FUZZ_* widen it).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import fc from 'fast-check';
import { Packr } from 'msgpackr';
import { afterAll, describe, expect, it } from 'vitest';

import { readRecordFile, RecordFileError, writeRecords, type RecordFile } from '../src/trace/record-file.js';
import { RECORDS_FORMAT, RECORDS_VERSION, type RequestRecord, type RunHeader } from '../src/trace/records.js';

import { budget } from './helpers/property-budget.js';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-records-fuzz-'));
let files = 0;
const path = () => join(dir, `f${files++}.msgpack`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const header: RunHeader = {
  format: RECORDS_FORMAT,
  version: RECORDS_VERSION,
  source: 'sim',
  trace: { path: 't.jsonl', fingerprint: 'sha256:00:1' },
  kvroute_version: '0.1.0',
  command: ['sim', 'run'],
  started_at: '2026-12-02T00:00:00.000Z',
};

const record: fc.Arbitrary<RequestRecord> = fc
  .record({
    session: fc.string({ maxLength: 8 }),
    turn: fc.nat(50),
    instance: fc.integer({ min: -1, max: 64 }),
    dispatch: fc.double({ min: 0, max: 1e6, noNaN: true }),
    first_token: fc.double({ min: 0, max: 1e6, noNaN: true }),
    finish: fc.double({ min: 0, max: 1e6, noNaN: true }),
    input_tokens: fc.nat(),
    cached_tokens: fc.nat(),
    output_tokens: fc.nat(4096),
    overlapped: fc.boolean(),
    preemptions: fc.nat(3),
    predicted_cached_tokens: fc.option(fc.nat(), { nil: undefined }),
    reason: fc.option(fc.constantFrom('affinity', 'load', 'cache 12/14'), { nil: undefined }),
  })
  .map((r) => {
    const out: Record<string, unknown> = { ...r };
    for (const key of Object.keys(out)) if (out[key] === undefined) delete out[key];
    return out as unknown as RequestRecord;
  });

function read(bytes: Uint8Array): RecordFile | RecordFileError {
  const file = path();
  writeFileSync(file, bytes);
  try {
    return readRecordFile(file);
  } catch (error) {
    if (!(error instanceof RecordFileError)) throw error; // anything else is a finding
    expect(error.message.startsWith(`${file}: `)).toBe(true);
    return error;
  }
}

/** A file as writeRecords writes it, and the offset where each of its values ends. */
function validFile(records: RequestRecord[]): { bytes: Buffer; ends: number[] } {
  const file = path();
  writeRecords(file, records, header);
  const bytes = readFileSync(file);
  // The same packer settings, value by value, give the boundaries.
  const packr = new Packr({ useRecords: true, sequential: true });
  const ends: number[] = [];
  let at = 0;
  for (const value of [header, ...records]) ends.push((at += packr.pack(value).length));
  expect(at).toBe(bytes.length);
  return { bytes, ends };
}

describe('record file reader: property-based fuzzing', () => {
  it('arbitrary bytes and flipped valid files give records or a RecordFileError', () => {
    const flipped = fc
      .tuple(
        fc.array(record, { maxLength: 4 }),
        fc.array(fc.tuple(fc.nat(), fc.nat(255)), { minLength: 1, maxLength: 3 }),
      )
      .map(([records, flips]) => {
        const bytes = Buffer.from(validFile(records).bytes);
        for (const [at, value] of flips) bytes[at % bytes.length] = value;
        return bytes;
      });
    fc.assert(
      fc.property(fc.oneof(fc.uint8Array({ maxLength: 300 }), flipped), (bytes) => {
        const result = read(bytes);
        if (!(result instanceof RecordFileError)) expect(Array.isArray(result.records)).toBe(true);
      }),
      budget(300),
    );
  });

  it('a valid file cut anywhere gives the values before the cut and reports a cut value', () => {
    fc.assert(
      fc.property(
        fc.array(record, { maxLength: 5 }),
        fc.array(fc.nat(), { minLength: 1, maxLength: 8 }),
        (records, cuts) => {
          const { bytes, ends } = validFile(records);
          for (const c of cuts) {
            const at = c % (bytes.length + 1);
            const result = read(bytes.subarray(0, at));
            expect(result).not.toBeInstanceOf(RecordFileError);
            const whole = ends.filter((end) => end <= at).length; // values wholly before the cut
            const lastEnd = whole === 0 ? 0 : ends[whole - 1]!;
            expect(result).toEqual({
              header: whole > 0 ? header : undefined,
              records: records.slice(0, Math.max(0, whole - 1)),
              truncated: at === lastEnd ? undefined : { at: lastEnd, bytes: at - lastEnd },
            });
          }
        },
      ),
      budget(200),
    );
  });
});
