/**
 * Property-based fuzzing (fast-check) of the proxy's HTTP/1.1 response parser
 * (src/proxy/upstream/h1-response-parser.ts), whose input is whatever an upstream sends:
 *   - arbitrary bytes, and valid responses with bytes flipped, inserted or cut, fed in arbitrary
 *     pieces with the sink pausing at random: the parser throws nothing but its own ParseError,
 *     never loops, and gives the same result however the bytes are cut;
 *   - a valid response (1xx heads, any status, fields with odd spacing and latin1 values,
 *     Content-Length, chunked with extensions and trailers, or read until close) parses to what
 *     was written (status, reason, fields, body, trailers), whole and split at every boundary.
 * Budget: test/helpers/property-budget.ts (fixed seed and runs; FUZZ_* widen it).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

import { ParseError, ResponseParser, type ResponseSink } from '../src/proxy/upstream/h1-response-parser.js';

import { budget } from './helpers/property-budget.js';

interface Parsed {
  heads: { status: number; statusText: string; fields: string[]; keepAliveHintMs: number }[];
  body: string;
  trailers: string[] | undefined;
  keepAlive: boolean;
  /** finish() at the end of the bytes (the connection closed). */
  complete: boolean;
  /** A ParseError's message. */
  error: string | undefined;
}

/** Feeds `pieces` in order; `pauses` (cycled) says whether each sink call asks to pause. */
function parse(pieces: Buffer[], pauses: boolean[] = [false], headRequest = false): Parsed {
  let call = 0;
  const pause = () => !pauses[call++ % pauses.length];
  const result: Parsed = {
    heads: [],
    body: '',
    trailers: undefined,
    keepAlive: false,
    complete: false,
    error: undefined,
  };
  const sink: ResponseSink = {
    onHead(status, statusText, fields, keepAliveHintMs) {
      result.heads.push({ status, statusText, fields: [...fields], keepAliveHintMs });
      return pause();
    },
    onBody(chunk) {
      result.body += chunk.toString('latin1');
      return pause();
    },
    onEnd(trailers) {
      expect(result.trailers, 'onEnd twice').toBeUndefined();
      result.trailers = [...trailers];
    },
  };
  const parser = new ResponseParser(sink, headRequest);
  try {
    outer: for (const piece of pieces) {
      let rest = piece;
      // Each feed consumes at least one byte unless the message is done: bounded by the bytes.
      for (let guard = 0; rest.length > 0; guard++) {
        if (guard > piece.length + 2) throw new Error(`the parser stopped consuming (state done=${parser.done})`);
        const used = parser.feed(rest);
        if (parser.done) break outer;
        rest = rest.subarray(used);
      }
    }
    result.complete = parser.finish();
  } catch (error) {
    if (!(error instanceof ParseError)) throw error; // anything else is a finding
    expect(error.code).toBe('HPE_INVALID_RESPONSE');
    result.error = error.message;
  }
  result.keepAlive = parser.keepAlive;
  return result;
}

/** `bytes` cut at the given offsets (sorted, deduplicated, inside the buffer). */
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

const tokenChar = fc.constantFrom(..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~");
const token = fc.string({ unit: tokenChar, minLength: 1, maxLength: 12 });
/** A field value: latin1 without CR, LF or NUL, not starting or ending with space or tab. */
const valueChar = fc
  .integer({ min: 0x20, max: 0xff })
  .filter((c) => c !== 0x7f)
  .map((c) => String.fromCharCode(c));
const fieldValue = fc.string({ unit: valueChar, maxLength: 20 }).map((v) => v.replace(/^[ \t]+|[ \t]+$/g, ''));
const field = fc.tuple(
  token.filter((n) => !/^(content-length|transfer-encoding|connection|keep-alive)$/i.test(n)),
  fieldValue,
  fc.constantFrom('', ' ', '  ', '\t', ' \t'),
);
const bodyBytes = fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b).toString('latin1'));

interface Response {
  wire: Buffer;
  status: number;
  statusText: string;
  fields: string[];
  body: string;
  trailers: string[];
  headRequest: boolean;
}

const response = fc
  .record({
    informational: fc.array(fc.tuple(fc.constantFrom(100, 102, 103), fc.array(field, { maxLength: 2 })), {
      maxLength: 2,
    }),
    minor: fc.constantFrom(0, 1),
    status: fc.constantFrom(200, 201, 204, 206, 304, 404, 500, 503),
    reason: fc.string({ unit: fc.constantFrom(...'OK Not Found Error'), maxLength: 12 }),
    fields: fc.array(field, { maxLength: 5 }),
    framing: fc.constantFrom('length', 'chunked', 'close'),
    lengthName: fc.constantFrom('Content-Length', 'content-length', 'CONTENT-LENGTH'),
    body: bodyBytes,
    chunkCuts: fc.array(fc.nat(), { maxLength: 5 }),
    chunkSizeStyle: fc.constantFrom('lower', 'upper', 'padded'),
    extensions: fc.boolean(),
    trailers: fc.array(field, { maxLength: 2 }),
    headRequest: fc.boolean(),
  })
  .map((r): Response => {
    const lines: string[] = [];
    for (const [status, fields] of r.informational) {
      lines.push(`HTTP/1.1 ${status} Info\r\n`, ...fields.map(([n, v, s]) => `${n}:${s}${v}\r\n`), '\r\n');
    }
    const fields: string[] = r.fields.flatMap(([n, v]) => [n, v]);
    const statusLine = `HTTP/1.${r.minor} ${r.status}${r.reason === '' ? '' : ` ${r.reason}`}\r\n`;
    const head = [statusLine, ...r.fields.map(([n, v, s]) => `${n}:${s}${v}\r\n`)];
    const noBody = r.headRequest || r.status === 204 || r.status === 304;
    let wireBody = '';
    let trailers: string[] = [];
    if (r.framing === 'length') {
      head.push(`${r.lengthName}: ${r.body.length}\r\n`);
      fields.push(r.lengthName, String(r.body.length));
      if (!noBody) wireBody = r.body;
    } else if (r.framing === 'chunked') {
      head.push('Transfer-Encoding: chunked\r\n');
      fields.push('Transfer-Encoding', 'chunked');
      if (!noBody) {
        const points = [...new Set(r.chunkCuts.map((c) => c % (r.body.length + 1)))].sort((a, b) => a - b);
        let from = 0;
        for (const p of [...points, r.body.length]) {
          if (p === from) continue;
          const size = (p - from).toString(16);
          const written =
            r.chunkSizeStyle === 'upper' ? size.toUpperCase() : r.chunkSizeStyle === 'padded' ? `00${size}` : size;
          wireBody += `${written}${r.extensions ? ';ext=1; x' : ''}\r\n${r.body.slice(from, p)}\r\n`;
          from = p;
        }
        trailers = r.trailers.flatMap(([n, v]) => [n, v]);
        wireBody += `0\r\n${r.trailers.map(([n, v, s]) => `${n}:${s}${v}\r\n`).join('')}\r\n`;
      }
    } else if (!noBody) {
      wireBody = r.body; // until the connection closes
    }
    head.push('\r\n');
    const wire = Buffer.from([...lines, ...head, wireBody].join(''), 'latin1');
    return {
      wire,
      status: r.status,
      statusText: r.reason,
      fields,
      body: noBody ? '' : r.body,
      trailers,
      headRequest: r.headRequest,
    };
  });

/** Valid responses with a few bytes flipped, inserted or removed. */
const mutated = fc
  .tuple(
    response,
    fc.array(fc.tuple(fc.constantFrom('flip', 'insert', 'delete'), fc.nat(), fc.nat(255)), {
      minLength: 1,
      maxLength: 4,
    }),
  )
  .map(([r, edits]) => {
    const bytes = [...r.wire];
    for (const [kind, at, value] of edits) {
      const i = at % (bytes.length + 1);
      if (kind === 'insert') bytes.splice(i, 0, value);
      else if (i < bytes.length) {
        if (kind === 'flip') bytes[i] = value;
        else bytes.splice(i, 1);
      }
    }
    return Buffer.from(bytes);
  });

const anyBytes = fc.oneof(
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.from(b)),
  fc.uint8Array({ maxLength: 300 }).map((b) => Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\n'), Buffer.from(b)])),
  mutated,
);

describe('h1 response parser: property-based fuzzing', () => {
  it('arbitrary bytes in arbitrary pieces: only ParseError, no loop, the same result however cut', () => {
    fc.assert(
      fc.property(
        anyBytes,
        fc.array(fc.nat(), { maxLength: 6 }),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        (bytes, cuts, pauses, headRequest) => {
          const whole = parse([bytes], [false], headRequest);
          const pieces = parse(cut(bytes, cuts), pauses, headRequest);
          expect(pieces).toEqual(whole);
        },
      ),
      budget(1500),
    );
  });

  it('a valid response parses to what was written, whole and split at every boundary', () => {
    fc.assert(
      fc.property(response, (r) => {
        const whole = parse([r.wire], [false], r.headRequest);
        expect(whole.error).toBeUndefined();
        expect(whole.complete).toBe(true);
        expect(whole.heads).toHaveLength(1);
        const [head] = whole.heads;
        expect(head!.status).toBe(r.status);
        expect(head!.statusText).toBe(r.statusText);
        expect(head!.fields).toEqual(r.fields);
        expect(whole.body).toBe(r.body);
        expect(whole.trailers).toEqual(r.trailers);
        // Compared as JSON (cheap); a difference is shown in full by toEqual.
        const expected = JSON.stringify(whole);
        for (let at = 0; at <= r.wire.length; at++) {
          const split = parse([r.wire.subarray(0, at), r.wire.subarray(at)], [true, false], r.headRequest);
          if (JSON.stringify(split) !== expected) expect({ at, split }).toEqual({ at, split: whole });
        }
      }),
      budget(200),
    );
  });
});
