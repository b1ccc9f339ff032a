/**
 * Record files: the header round-trips, a live writer leaves a readable file at every batch, a
 * truncated last value is reported (never dropped silently), and what is not a record file, or
 * holds a bad record, is refused naming the file, the record and the field.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Packr } from 'msgpackr';
import { afterAll, describe, expect, it } from 'vitest';

import { readRecordFile, RecordWriter, writeRecords } from '../src/trace/record-file.js';
import { RECORDS_FORMAT, RECORDS_VERSION, type RequestRecord, type RunHeader } from '../src/trace/records.js';
import { TraceFingerprint } from '../src/trace/trace-fingerprint.js';
import type { TraceRequest } from '../src/trace/types.js';
import { Rng } from './helpers/random.js';

const dir = mkdtempSync(join(tmpdir(), 'kvroute-records-'));
let files = 0;
const path = () => join(dir, `r${files++}.msgpack`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const header: RunHeader = {
  format: RECORDS_FORMAT,
  version: RECORDS_VERSION,
  source: 'replay',
  trace: { path: 't.jsonl', fingerprint: 'sha256:0123456789abcdef:3' },
  target: 'http://127.0.0.1:1',
  mode: 'session',
  kvroute_version: '0.1.0',
  command: ['replay'],
  started_at: '2026-12-01T00:00:00.000Z',
};

function randomRecords(rng: Rng, count: number): RequestRecord[] {
  return Array.from({ length: count }, (_, i) => {
    const dispatch = rng.int(0, 1e6) / 1000;
    const record: RequestRecord = {
      session: `s${rng.int(0, 50)}`,
      turn: rng.int(1, 9),
      instance: rng.int(-1, 7),
      dispatch,
      first_token: dispatch + rng.next(),
      finish: dispatch + 1 + rng.next(),
      input_tokens: rng.int(0, 100_000),
      cached_tokens: rng.int(0, 100_000),
      output_tokens: rng.int(0, 900),
      overlapped: rng.chance(0.5),
      preemptions: rng.int(0, 2),
    };
    if (rng.chance(0.5)) record.reason = rng.pick(['affinity', 'load', 'cache 12/14']);
    // Absent (older files), null (a target without the header), or the router's prediction.
    if (rng.chance(0.7)) record.predicted_cached_tokens = rng.chance(0.3) ? null : rng.int(0, 100_000);
    if (rng.chance(0.3)) Object.assign(record, { status: 503, error: `upstream ${i} failed` });
    return record;
  });
}

describe('record files', () => {
  it('round-trip a header and records, written at once or streamed (randomized)', () => {
    const rng = new Rng(21);
    for (let trial = 0; trial < 5; trial++) {
      const records = randomRecords(rng, rng.int(0, 800));
      const atomic = path();
      writeRecords(atomic, records, header);
      expect(readRecordFile(atomic)).toEqual({ header, records, truncated: undefined });
      const streamed = path();
      const writer = new RecordWriter(streamed, header, rng.int(8, 300));
      for (const record of records) writer.write(record);
      writer.close();
      expect(readRecordFile(streamed)).toEqual({ header, records, truncated: undefined });
      expect(readFileSync(streamed)).toEqual(readFileSync(atomic));
    }
  });

  it('leave every flushed batch readable while a live run is still writing', () => {
    const records = randomRecords(new Rng(2), 1000);
    const live = path();
    const writer = new RecordWriter(live, header, 100);
    expect(readRecordFile(live)).toEqual({ header, records: [], truncated: undefined });
    for (const [i, record] of records.entries()) {
      writer.write(record);
      if (i === 549) expect(readRecordFile(live).records).toEqual(records.slice(0, 500));
    }
    writer.close();
    expect(readRecordFile(live).records).toEqual(records);
  });

  it('report a truncated last value with the records before it, at every cut', () => {
    const records = randomRecords(new Rng(3), 40);
    const whole = path();
    writeRecords(whole, records, header);
    const bytes = readFileSync(whole);
    const cut = path();
    let truncations = 0;
    for (let length = bytes.length - 1; length > bytes.length - 150; length--) {
      writeFileSync(cut, bytes.subarray(0, length));
      const file = readRecordFile(cut);
      expect(records.slice(0, file.records.length)).toEqual(file.records);
      if (file.truncated !== undefined) {
        truncations++;
        expect(file.truncated.at + file.truncated.bytes).toBe(length);
      } else expect(file.records.length).toBeLessThan(records.length); // cut on a boundary
    }
    expect(truncations).toBeGreaterThan(100);
  });

  it('read files written before headers (sim run --records of kvroute 0.1)', () => {
    const records = randomRecords(new Rng(4), 50);
    const old = path();
    writeRecords(old, records);
    expect(readRecordFile(old)).toEqual({ header: undefined, records, truncated: undefined });
  });

  it('refuse what is not a record file, and name a bad record and field', () => {
    const trace = path();
    writeFileSync(trace, '{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1]}\n');
    expect(() => readRecordFile(trace)).toThrow(/not a kvroute record file: its first value is 123.*is this a trace\?/);
    const packr = new Packr({ useRecords: true, sequential: true });
    const [good] = randomRecords(new Rng(5), 1);
    const bad = path();
    writeFileSync(bad, Buffer.concat([packr.pack(header), packr.pack(good), packr.pack({ ...good, finish: 'late' })]));
    expect(() => readRecordFile(bad)).toThrow(
      expect.objectContaining({
        code: 'ERR_KVROUTE_RECORDS',
        message: expect.stringMatching(/record 2: finish: must be a finite number, got "late"/),
      }),
    );
    for (const [value, shown] of [
      [-16, '-16'],
      [1.5, '1.5'],
      ['128', '"128"'],
    ] as const) {
      const badPrediction = path();
      const fresh = new Packr({ useRecords: true, sequential: true }); // a file defines its own structures
      writeFileSync(
        badPrediction,
        Buffer.concat([fresh.pack(header), fresh.pack({ ...good, predicted_cached_tokens: value })]),
      );
      expect(() => readRecordFile(badPrediction)).toThrow(
        `record 1: predicted_cached_tokens: must be a non-negative integer or null, got ${shown}`,
      );
    }
    const newer = path();
    writeFileSync(newer, new Packr({ useRecords: true, sequential: true }).pack({ ...header, version: 3 }));
    expect(() => readRecordFile(newer)).toThrow(/version 3 is newer than this kvroute reads \(2\)/);
    expect(() => readRecordFile(join(dir, 'absent'))).toThrow(
      expect.objectContaining({ code: 'ERR_KVROUTE_TRACE_IO' }),
    );
  });
});

describe('trace fingerprints', () => {
  const request = (session: string, turn: number, ids: number[]): TraceRequest => ({
    session,
    turn,
    arrival: 0,
    inputLength: ids.length * 16,
    outputLength: 1,
    hashIds: ids,
    blockSize: 16,
  });
  const digest = (requests: TraceRequest[]) => {
    const fingerprint = new TraceFingerprint();
    for (const r of requests) fingerprint.add(r);
    return fingerprint.digest();
  };

  it('is the same for the same requests and differs when one changes', () => {
    const base = Array.from({ length: 3000 }, (_, i) => request(`s${i % 7}`, i + 1, [i, i + 1]));
    expect(digest(base)).toBe(digest(base.map((r) => ({ ...r, arrival: 5 }))));
    expect(digest(base)).toMatch(/^sha256:[0-9a-f]{16}:3000$/);
    const changed = base.map((r, i) => (i === 2500 ? { ...r, outputLength: 2 } : r));
    expect(digest(changed)).not.toBe(digest(base));
  });
});
