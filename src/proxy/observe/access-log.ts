/**
 * The request log (`kvroute serve --access-log PATH|-`): one JSON line per finished completion
 * request, written from a ProxyObserver's onRequest. The line format is in docs/proxy.md
 * ("Request log"); formatRecord() is the one place that defines it.
 *
 * Writing never holds a request up: lines go into a buffered append-mode WriteStream (`-`: the
 * process's stdout) and the proxy does not wait for them.
 *
 * Hazards, and what happens:
 * - The disk is slower than the traffic: lines queue in memory up to MAX_QUEUED_BYTES; past it
 *   lines are dropped and counted (warned once, and the total again at close) rather than letting
 *   the queue grow without bound.
 * - A write fails (disk full, the directory gone): warned once; lines are dropped and counted
 *   until reopen() succeeds.
 * - Log rotation: reopen() (kvroute serve runs it on SIGHUP) lets the current file finish what is
 *   queued and opens the path anew, so a renamed file is closed and a fresh one started.
 * - close() resolves once every queued line is written (or has failed; stdout: reached its reader,
 *   waiting at most STDOUT_DRAIN_MS), so a clean stop loses nothing.
 */
import { createWriteStream, type WriteStream } from 'node:fs';

import { echo } from '../server/error-body.js';
import type { ProxyObserver, RequestRecord } from './proxy-observer.js';

/** Lines queued in memory past this many bytes are dropped, not buffered. */
const MAX_QUEUED_BYTES = 16 * 2 ** 20;

/** The most of a request's error message a line carries. */
const MAX_ERROR_CHARS = 1024;

/**
 * The line for one request (with its newline); keys are absent when the proxy does not know them.
 * What the client chose (request id, path, model, session, and the error that may quote them) is
 * capped through echo(), so one request with a 60 MB model name writes a short line.
 */
export function formatRecord(r: RequestRecord): string {
  const line: Record<string, string | number | boolean> = {
    time: new Date(r.startedAt).toISOString(),
    request_id: echo(r.requestId),
    path: echo(r.path),
    status: r.status,
    outcome: r.outcome,
  };
  if (r.error !== undefined) line.error = echo(r.error, MAX_ERROR_CHARS);
  if (r.model !== undefined) line.model = echo(r.model);
  if (r.instance !== undefined) line.instance = r.instance;
  if (r.reason !== undefined) line.reason = r.reason;
  if (r.session !== undefined) line.session = echo(r.session);
  if (r.stream !== undefined) line.stream = r.stream;
  line.attempts = r.attempts;
  if (r.ttftMs !== undefined) line.ttft_ms = round3(r.ttftMs);
  line.e2e_ms = round3(r.e2eMs);
  if (r.usage !== undefined) {
    line.prompt_tokens = r.usage.prompt_tokens;
    line.cached_tokens = r.usage.cached_tokens;
  }
  if (r.offload !== undefined) {
    line.prefill_instance = r.offload.prefillInstance;
    if (r.offload.prefillMs !== undefined) line.prefill_ms = round3(r.offload.prefillMs);
    if (r.offload.fallback !== undefined) line.offload_fallback = r.offload.fallback;
  }
  return `${JSON.stringify(line)}\n`;
}

const round3 = (ms: number) => Math.round(ms * 1000) / 1000;

export interface AccessLog {
  /** Pass in `createProxy({ observers })`. */
  readonly observer: ProxyObserver;
  /** Where it writes: the path, or `-` for stdout. */
  readonly target: string;
  /** Lines dropped so far (queue full or a failed write). */
  readonly dropped: number;
  /** Reopens the path (log rotation); a no-op for stdout. Rejects if the path cannot be opened. */
  reopen(): Promise<void>;
  /** Writes what is queued and closes the file; later requests are not logged. */
  close(): Promise<void>;
}

export interface AccessLogOptions {
  /** Where problems go (default: stderr). */
  onWarning?: (message: string) => void;
}

/** Opens the log for appending (creating the file); rejects, naming the path, if it cannot. */
export async function openAccessLog(target: string, options: AccessLogOptions = {}): Promise<AccessLog> {
  const warn = options.onWarning ?? ((message: string) => process.stderr.write(`${message}\n`));
  const toStdout = target === '-';
  // process.stdout writes asynchronously to a pipe or socket (a log shipper) and synchronously to
  // a file or terminal (Node's "note on process I/O"); a stalled pipe reader thus fills the
  // bounded queue instead of stalling the proxy. It is never closed here.
  let stream: NodeJS.WritableStream & { writableLength: number } = toStdout ? process.stdout : await openFile(target);
  let failing = false;
  let closed = false;
  let dropped = 0;
  let warnedDrop = false;

  const watch = (s: WriteStream) =>
    s.on('error', (error: NodeJS.ErrnoException) => {
      if (!failing)
        warn(
          `kvroute access log: writing ${target} failed (${error.code ?? error.message}); lines are dropped until it is reopened`,
        );
      failing = true;
    });
  if (!toStdout) watch(stream as WriteStream);

  const drop = () => {
    dropped++;
    if (warnedDrop || failing) return;
    warnedDrop = true;
    warn(`kvroute access log: ${target} is falling behind (over ${MAX_QUEUED_BYTES} bytes queued); dropping lines`);
  };

  const observer: ProxyObserver = {
    onRequest(record) {
      if (closed) return;
      if (failing || stream.writableLength > MAX_QUEUED_BYTES) return drop();
      stream.write(formatRecord(record));
    },
  };

  return {
    observer,
    target,
    get dropped() {
      return dropped;
    },
    async reopen() {
      if (toStdout || closed) return;
      const next = await openFile(target);
      const previous = stream as WriteStream;
      watch(next);
      stream = next;
      failing = false;
      await finish(previous);
    },
    async close() {
      if (closed) return;
      closed = true;
      if (toStdout) await drained(stream, STDOUT_DRAIN_MS);
      else await finish(stream as WriteStream);
      if (dropped > 0) warn(`kvroute access log: ${dropped} lines were dropped in all`);
    },
  };
}

/** An append-mode stream on `path` once it is open; rejects with the reason if it cannot be. */
function openFile(path: string): Promise<WriteStream> {
  return new Promise((resolve, reject) => {
    const stream = createWriteStream(path, { flags: 'a' });
    const failed = (error: NodeJS.ErrnoException) =>
      reject(new Error(`cannot open the access log ${path}: ${error.code ?? error.message}`));
    stream.once('error', failed);
    stream.once('open', () => {
      stream.off('error', failed);
      resolve(stream);
    });
  });
}

/** Longest close() waits for stdout's queue to reach the pipe's reader. */
const STDOUT_DRAIN_MS = 5_000;

/** Resolves once the stream has nothing queued, or after `ms`. */
function drained(stream: NodeJS.WritableStream & { writableLength: number }, ms: number): Promise<void> {
  if (stream.writableLength === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    stream.once('drain', done);
    function done() {
      clearTimeout(timer);
      stream.off('drain', done);
      resolve();
    }
  });
}

/** Ends the stream and resolves when its queue is written or it failed. */
function finish(stream: WriteStream): Promise<void> {
  return new Promise((resolve) => {
    if (stream.closed) return resolve();
    stream.once('close', () => resolve());
    stream.end();
  });
}
