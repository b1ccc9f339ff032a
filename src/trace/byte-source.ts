/**
 * The bytes of a trace: a file or stdin, gzip-decompressed when its first bytes say so (the
 * extension is not trusted, so `cat trace.jsonl.gz | kvroute … -` works too). Other compressed
 * or non-UTF-8 inputs are refused by their magic bytes with the command that converts them,
 * instead of surfacing later as "malformed JSON" on line 1.
 *
 * `bytesRead` counts the bytes taken from the file (compressed bytes for gzip), so that with
 * `totalBytes` it measures progress through the file whatever the encoding.
 */
import { createReadStream, fstatSync, statSync } from 'node:fs';
import { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';

import { decodeError, ioError, TraceFormatError } from './trace-errors.js';

const CHUNK_BYTES = 1 << 20;

/** Encodings recognised by their first bytes that kvroute does not read, and how to convert them. */
const REFUSED: ReadonlyArray<{ magic: readonly number[]; name: string; convert: string }> = [
  { magic: [0x28, 0xb5, 0x2f, 0xfd], name: 'zstd-compressed', convert: 'zstd -dc FILE' },
  { magic: [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], name: 'xz-compressed', convert: 'xz -dc FILE' },
  { magic: [0x42, 0x5a, 0x68], name: 'bzip2-compressed', convert: 'bzip2 -dc FILE' },
  { magic: [0x50, 0x4b, 0x03, 0x04], name: 'a zip archive', convert: 'unzip -p FILE' },
  { magic: [0xff, 0xfe], name: 'UTF-16 text', convert: 'iconv -f UTF-16 -t UTF-8 FILE' },
  { magic: [0xfe, 0xff], name: 'UTF-16 text', convert: 'iconv -f UTF-16 -t UTF-8 FILE' },
];
const GZIP_MAGIC = [0x1f, 0x8b] as const;

function startsWith(chunk: Buffer, magic: readonly number[]): boolean {
  return chunk.length >= magic.length && magic.every((byte, i) => chunk[i] === byte);
}

export class ByteSource {
  /** Bytes taken from the file or stdin so far (before decompression). */
  bytesRead = 0;
  /** The file's size, when it is a regular file (stdin redirected from a file included). */
  readonly totalBytes: number | undefined;
  /** True once the first bytes showed gzip. */
  gzip = false;

  constructor(
    private readonly path: string,
    private readonly source: string,
  ) {
    this.totalBytes = regularFileSize(path);
  }

  /** The decoded bytes, chunk by chunk. Errors of the file system are ERR_KVROUTE_TRACE_IO. */
  async *chunks(): AsyncGenerator<Buffer> {
    const raw: Readable =
      this.path === '-' ? process.stdin : createReadStream(this.path, { highWaterMark: CHUNK_BYTES });
    try {
      const counted = this.counted(raw);
      const first = await counted.next();
      if (first.done) return;
      this.refuseUnreadable(first.value);
      if (!startsWith(first.value, GZIP_MAGIC)) {
        yield first.value;
        yield* counted;
        return;
      }
      this.gzip = true;
      const gunzip = Readable.from(prepend(first.value, counted)).pipe(createGunzip({ chunkSize: CHUNK_BYTES }));
      try {
        for await (const chunk of gunzip as AsyncIterable<Buffer>) yield chunk;
      } catch (error) {
        if (!(error as NodeJS.ErrnoException).code?.startsWith('Z_')) throw error;
        throw decodeError(
          `${this.source}: gzip: ${(error as Error).message} (is the file truncated or corrupt?)`,
          error,
        );
      } finally {
        gunzip.destroy();
      }
    } catch (error) {
      if ((error as NodeJS.ErrnoException).syscall !== undefined) throw ioError(this.path, error);
      throw error;
    } finally {
      if (raw !== process.stdin) raw.destroy();
    }
  }

  private async *counted(raw: Readable): AsyncGenerator<Buffer> {
    for await (const chunk of raw as AsyncIterable<Buffer>) {
      this.bytesRead += chunk.length;
      yield chunk;
    }
  }

  private refuseUnreadable(first: Buffer): void {
    for (const { magic, name, convert } of REFUSED) {
      if (!startsWith(first, magic)) continue;
      const file = this.path === '-' ? 'FILE' : this.path;
      throw new TraceFormatError(
        1,
        undefined,
        `the input is ${name}, which kvroute does not read (it reads UTF-8 JSONL, plain or gzip); convert it first: ${convert.replace('FILE', file)} | kvroute … -`,
        this.source,
      );
    }
  }
}

async function* prepend(first: Buffer, rest: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  yield first;
  yield* rest;
}

function regularFileSize(path: string): number | undefined {
  try {
    const stats = path === '-' ? fstatSync(0) : statSync(path);
    return stats.isFile() ? stats.size : undefined;
  } catch {
    return undefined; // reported with its reason when the read starts
  }
}
