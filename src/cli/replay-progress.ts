/**
 * `kvroute replay`'s progress: on a TTY, progress.ts's line (requests done of the trace, sent,
 * errors, rate, ETA); on any other stream (a pipe, a CI log) a plain line every `everyMs` (default 10 s) with
 * what was sent, done and failed, the rate and the time elapsed, as logs want.
 *
 * Hazard: the plain timer is unref'd, so it never keeps the process alive; stop() ends either.
 */
import { formatCount, formatDuration, formatTotal } from '../analysis/format-units.js';
import type { ReplayTally } from '../replay/replay-tally.js';
import { startProgress, type Progress, type ProgressStream } from './progress.js';

export const PLAIN_EVERY_MS = 10_000;

export function replayProgress(
  label: string,
  tally: ReplayTally,
  total: number,
  { stream = process.stderr, everyMs = PLAIN_EVERY_MS }: { stream?: ProgressStream; everyMs?: number } = {},
): Progress {
  if (stream.isTTY === true)
    return startProgress({
      label,
      unit: 'requests',
      total,
      poll: () => tally.done,
      stream,
      detail: () => `${formatTotal(tally.sent)} sent · ${formatTotal(tally.errors)} errors`,
    });
  const started = Date.now();
  const timer = setInterval(() => {
    const seconds = (Date.now() - started) / 1000;
    stream.write(
      `kvroute ${label}: ${tally.sent} sent, ${tally.done} done, ${tally.errors} errors, ${formatCount(tally.done / seconds)} req/s, ${formatDuration(seconds)} elapsed\n`,
    );
  }, everyMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
