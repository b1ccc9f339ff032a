/**
 * Writes TraceRequests as Mooncake or session JSONL. A file is written to a temporary name
 * beside the target and renamed into place only after the last line is flushed, so a failure
 * mid-way (a bad request upstream, a full disk) never leaves a half-written trace behind.
 */
import { createWriteStream, renameSync, rmSync, type WriteStream } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { once } from 'node:events';

import { ioError } from './trace-errors.js';
import { DEFAULT_BLOCK_SIZE, type TraceFormat, type TraceRequest } from './types.js';

/**
 * One JSONL line (without the newline). Mooncake lines carry no session, and `timestamp` in
 * milliseconds; a non-512 block size is kept as a `block_size` extension so re-reading is exact.
 */
export function formatTraceLine(request: TraceRequest, format: TraceFormat): string {
  const ids = `[${request.hashIds.join(', ')}]`;
  const flow =
    (request.tenant === undefined ? '' : `, "tenant": ${JSON.stringify(request.tenant)}`) +
    (request.priority === undefined ? '' : `, "priority": ${JSON.stringify(request.priority)}`);
  if (format === 'mooncake') {
    const ms = millisecondsOf(request.arrival);
    const block = request.blockSize === DEFAULT_BLOCK_SIZE.mooncake ? '' : `, "block_size": ${request.blockSize}`;
    return `{"timestamp": ${ms}, "input_length": ${request.inputLength}, "output_length": ${request.outputLength}, "hash_ids": ${ids}${block}${flow}}`;
  }
  const chat =
    request.chatId === undefined
      ? ''
      : `, "chat_id": ${request.chatId}, "parent_chat_id": ${request.parentChatId ?? -1}`;
  return `{"session_id": ${JSON.stringify(request.session)}, "turn": ${request.turn}${chat}${flow}, "timestamp": ${request.arrival}, "input_length": ${request.inputLength}, "output_length": ${request.outputLength}, "block_size": ${request.blockSize}, "hash_ids": ${ids}}`;
}

/**
 * Seconds → ms such that reading it back (ms / 1000) gives the same double: integer-ms traces
 * come back exactly, where a plain `× 1000` would leave 1-ulp noise (0.009 × 1000 ≠ 9).
 */
function millisecondsOf(seconds: number): number {
  const rounded = Math.round(seconds * 1e9) / 1e6;
  return rounded / 1000 === seconds ? rounded : seconds * 1000;
}

export interface WriteTraceResult {
  requests: number;
}

const FLUSH_CHARS = 1 << 20;

/** Writes `requests` to `path` ('-' for stdout) in `format`, atomically for files. */
export async function writeTrace(
  requests: AsyncIterable<TraceRequest> | Iterable<TraceRequest>,
  path: string,
  format: TraceFormat,
): Promise<WriteTraceResult> {
  if (path === '-') return writeTo(process.stdout, requests, format);
  const temporary = join(dirname(path), `.${basename(path)}.${process.pid}.tmp`);
  let out: WriteStream;
  try {
    out = createWriteStream(temporary, { flags: 'wx' });
    await once(out, 'open');
  } catch (error) {
    throw ioError(path, error);
  }
  try {
    const result = await writeTo(out, requests, format);
    out.end();
    await once(out, 'finish');
    renameSync(temporary, path);
    return result;
  } catch (error) {
    out.destroy();
    rmSync(temporary, { force: true });
    throw (error as NodeJS.ErrnoException).syscall === undefined ? error : ioError(path, error);
  }
}

async function writeTo(
  out: NodeJS.WritableStream,
  requests: AsyncIterable<TraceRequest> | Iterable<TraceRequest>,
  format: TraceFormat,
): Promise<WriteTraceResult> {
  let count = 0;
  let pending = '';
  const failed = new Promise<never>((_, reject) => out.once('error', reject));
  failed.catch(() => {}); // observed below; keeps an early error from being unhandled
  const flush = async (): Promise<void> => {
    const ok = out.write(pending);
    pending = '';
    if (!ok) await Promise.race([once(out, 'drain'), failed]);
  };
  for await (const request of requests) {
    pending += `${formatTraceLine(request, format)}\n`;
    count++;
    if (pending.length >= FLUSH_CHARS) await flush();
  }
  if (pending !== '') await flush();
  return { requests: count };
}
