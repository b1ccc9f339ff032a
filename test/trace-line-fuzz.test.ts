/**
 * Property-based fuzzing (fast-check) of the trace line reader (src/trace/line-reader.ts) and the
 * line parser (src/trace/trace-line.ts), the first code a user's trace file meets:
 *   - arbitrary bytes (newlines, CRs, a byte-order mark, blanks, invalid UTF-8) read in arbitrary
 *     chunks give the lines a plain split of the whole file gives, numbered as in the file;
 *   - every line, arbitrary text or a JSON object with the trace fields at random types and
 *     values, gives a trace line (both formats) or a TraceFormatError naming that line, never
 *     another error.
 * Budget: test/helpers/property-budget.ts (fixed seed and runs; FUZZ_* widen it).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { readLines, type NumberedLine } from '../src/trace/line-reader.js';
import { TraceFormatError } from '../src/trace/trace-errors.js';
import { parseLineObject, traceLine } from '../src/trace/trace-line.js';

import { budget } from './helpers/property-budget.js';

const BOM = Buffer.from([0xef, 0xbb, 0xbf]);

async function linesOf(chunks: Buffer[]): Promise<NumberedLine[]> {
  async function* source() {
    yield* chunks;
  }
  const lines: NumberedLine[] = [];
  for await (const line of readLines(source())) lines.push(line);
  return lines;
}

/** The reference: the whole file split on LF, one CR dropped, blank lines skipped but counted. */
function reference(bytes: Buffer): NumberedLine[] {
  if (bytes.length < BOM.length && bytes.equals(BOM.subarray(0, bytes.length))) return [];
  const body = bytes.subarray(0, 3).equals(BOM) ? bytes.subarray(3) : bytes;
  const out: NumberedLine[] = [];
  const parts: Buffer[] = [];
  let from = 0;
  for (let i = body.indexOf(10); i !== -1; i = body.indexOf(10, from)) {
    parts.push(body.subarray(from, i));
    from = i + 1;
  }
  if (from < body.length) parts.push(body.subarray(from));
  parts.forEach((part, i) => {
    const end = part.length > 0 && part[part.length - 1] === 13 ? part.length - 1 : part.length;
    const text = part.subarray(0, end);
    if (text.length > 0 && !/^[ \t]*$/.test(text.toString('latin1')))
      out.push({ line: i + 1, text: text.toString('utf8') });
  });
  return out;
}

function cut(bytes: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((a) => a % (bytes.length + 1)))].sort((a, b) => a - b);
  const pieces: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    pieces.push(bytes.subarray(from, p));
    from = p;
  }
  pieces.push(bytes.subarray(from));
  return pieces;
}

/** Bytes rich in what the reader cares about: LF, CR, spaces, tabs, BOM bytes, UTF-8. */
const lineByte = fc.oneof(
  fc.constantFrom(10, 13, 32, 9, 0xef, 0xbb, 0xbf, 0xc3, 0xa9, 0x7b, 0x7d),
  fc.integer({ min: 0, max: 255 }),
);
const fileBytes = fc
  .tuple(fc.boolean(), fc.array(lineByte, { maxLength: 200 }))
  .map(([bom, bytes]) => Buffer.concat([bom ? BOM : Buffer.alloc(0), Buffer.from(bytes)]));

/** A value of any JSON type, with the edges field checks care about. */
const edgeValue = fc.oneof(
  fc.constantFrom(0, -0, -1, 1.5, 2 ** 53, 2 ** 53 - 1, 1e308, -1e-300, '', '12', 'x', true, false, null),
  fc.integer(),
  fc.double(),
  fc.string({ maxLength: 6 }),
  fc.array(
    fc.oneof(fc.integer({ min: -2, max: 2 ** 53 }), fc.double(), fc.string({ maxLength: 3 }), fc.constant(null)),
    {
      maxLength: 4,
    },
  ),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
);
const FIELDS = [
  'timestamp',
  'input_length',
  'output_length',
  'hash_ids',
  'block_size',
  'session_id',
  'turn',
  'chat_id',
  'parent_chat_id',
] as const;
/** Each field mostly valid for its kind, sometimes an edge value of any type. */
const valid: Record<(typeof FIELDS)[number], fc.Arbitrary<unknown>> = {
  timestamp: fc.oneof(fc.nat(), fc.double({ min: 0, max: 1e12, noNaN: true })),
  input_length: fc.nat(),
  output_length: fc.nat(),
  hash_ids: fc.array(fc.nat(), { maxLength: 5 }),
  block_size: fc.integer({ min: 1, max: 1024 }),
  session_id: fc.string({ minLength: 1, maxLength: 5 }),
  turn: fc.nat(),
  chat_id: fc.nat(),
  parent_chat_id: fc.nat(),
};
const traceObject = fc
  .record(
    Object.fromEntries(
      FIELDS.map((f) => [f, fc.oneof({ arbitrary: valid[f], weight: 6 }, { arbitrary: edgeValue, weight: 1 })]),
    ) as Record<(typeof FIELDS)[number], fc.Arbitrary<unknown>>,
    { requiredKeys: [] },
  )
  .map((o) => JSON.stringify(o));
const lineText = fc.oneof(
  traceObject,
  fc.string({ maxLength: 40 }),
  fc.json({ maxDepth: 2 }),
  traceObject.map((t) => t.slice(0, Math.floor(t.length / 2))),
);

describe('trace line reader and parser: property-based fuzzing', () => {
  it('arbitrary bytes in arbitrary chunks give the lines of a plain split of the whole file', async () => {
    await fc.assert(
      fc.asyncProperty(fileBytes, fc.array(fc.nat(), { maxLength: 8 }), async (bytes, cuts) => {
        expect(await linesOf(cut(bytes, cuts))).toEqual(reference(bytes));
      }),
      budget(1000),
    );
  });

  it('every line gives a trace line or a TraceFormatError naming that line', () => {
    const seen = { accepted: 0, refused: 0 };
    fc.assert(
      fc.property(lineText, fc.integer({ min: 1, max: 1e6 }), (text, line) => {
        for (const format of ['mooncake', 'session'] as const) {
          try {
            const parsed = traceLine(parseLineObject(text, line, 'fuzz.jsonl'), format);
            expect(parsed.line).toBe(line);
            expect(Number.isFinite(parsed.timestamp) && parsed.timestamp >= 0).toBe(true);
            expect(Number.isSafeInteger(parsed.inputLength) && parsed.inputLength >= 0).toBe(true);
            expect(parsed.hashIds.every((id) => Number.isSafeInteger(id) && id >= 0)).toBe(true);
            seen.accepted++;
          } catch (error) {
            if (!(error instanceof TraceFormatError)) throw error;
            expect(error.line).toBe(line);
            expect(error.message.startsWith(`fuzz.jsonl:line ${line}: `)).toBe(true);
            seen.refused++;
          }
        }
      }),
      budget(1000),
    );
    // The generator reaches both answers (a generator that only makes bad lines checks little).
    expect(seen.accepted).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(0);
  });
});
