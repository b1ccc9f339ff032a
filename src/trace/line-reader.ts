/**
 * Streams a file (or stdin) as numbered lines without holding more than one read chunk plus
 * one partial line in memory. Lines are split on `\n` (a trailing `\r` is dropped) and decoded
 * as UTF-8 one at a time.
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';

import { ioError } from './trace-errors.js';

export interface NumberedLine {
  /** 1-based line number in the file. */
  line: number;
  text: string;
}

/** Bytes taken from the input so far; bumped once per read chunk, so cheap to poll from a timer. */
export interface ByteCounter {
  bytes: number;
}

const CHUNK_BYTES = 1 << 20;

/** `path` '-' reads stdin. Empty lines are skipped but still counted. */
export async function* readLines(path: string, counter?: ByteCounter): AsyncGenerator<NumberedLine> {
  const stream: Readable = path === '-' ? process.stdin : createReadStream(path, { highWaterMark: CHUNK_BYTES });
  let carry: Buffer | undefined;
  let line = 0;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      if (counter !== undefined) counter.bytes += chunk.length;
      const buffer = carry === undefined ? chunk : Buffer.concat([carry, chunk]);
      let start = 0;
      for (let newline = buffer.indexOf(10, start); newline !== -1; newline = buffer.indexOf(10, start)) {
        line++;
        const end = newline > start && buffer[newline - 1] === 13 ? newline - 1 : newline;
        if (end > start) yield { line, text: buffer.toString('utf8', start, end) };
        start = newline + 1;
      }
      carry = start < buffer.length ? buffer.subarray(start) : undefined;
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).syscall !== undefined) throw ioError(path, error);
    throw error;
  }
  if (carry !== undefined) {
    const end = carry[carry.length - 1] === 13 ? carry.length - 1 : carry.length;
    if (end > 0) yield { line: line + 1, text: carry.toString('utf8', 0, end) };
  }
}
