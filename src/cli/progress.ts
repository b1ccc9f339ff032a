/**
 * A progress line on stderr for the verbs that work for tens of seconds (analyze trace, trace
 * synth / transform / validate, sim run, tune): amount done, rate, and with a known total a bar, the
 * percentage and an ETA; without one (stdin) the amount, rate and elapsed time.
 *
 * Library: cli-progress 3.12.0, pinned exactly in package.json. It redraws one line in place
 * from its own timer at `fps` (only when the text changed), takes a format function (ours,
 * below: our units, the rate and ETA over a window, a bar that fits the terminal), does nothing
 * on a stream that is not a TTY, and clears its line on stop. One dependency (string-width,
 * already in the tree); about 25 M downloads a month. Looked at and not taken: `progress` 2.0.3
 * (unchanged since 2018; needs a total, so no stdin mode; draws only when the work calls it),
 * `gauge` 5 (npm's activity gauge, eight dependencies, no amount or ETA), `@opentf/cli-pbar`
 * 0.7 (pre-1.0, two dependencies, little use), and spinners (`ora`: no amount, no ETA).
 *
 * Invariants and hazards:
 * - Only a TTY stream (`isTTY === true`) is drawn on. Anywhere else (a pipe, a file, CI) or with
 *   `enabled: false`, startProgress returns a handle that does nothing and writes nothing, so
 *   piped and --json runs get no extra bytes. Nothing here writes to stdout.
 * - The hot loop never calls in: a timer polls `poll()` (a counter the work bumps anyway) every
 *   1/FPS s, and the library redraws at most FPS times a second. Timers fire only between the
 *   work's I/O waits, so the line moves a read chunk at a time.
 * - stop() leaves the cursor at the start of an empty line, so what the verb prints next (its
 *   output, warnings or an error) starts clean; it is idempotent. withProgress stops on error.
 * - The library's redraw timer is not unref'd: a bar that is never stopped keeps the process
 *   alive. Pair every start with a stop (withProgress does).
 * - No cursor hiding, no line-wrap switching, no SIGINT handler (the library's would keep
 *   Ctrl-C from ending the process): an interrupted run leaves at most a drawn line behind.
 */
import cliProgress from 'cli-progress';

import { formatBytes, formatCount, formatDuration } from '../analysis/format-units.js';

export type ProgressUnit = 'bytes' | 'requests' | 'sessions' | 'simulations';

/** What the bar draws on: process.stderr, or a stand-in with the same three members. */
export interface ProgressStream {
  isTTY?: boolean;
  columns?: number;
  write(chunk: string): boolean;
}

export interface ProgressOptions {
  /** Leads the line, e.g. "analyze trace". */
  label: string;
  unit: ProgressUnit;
  /**
   * The amount when done; a function when it is known only later (read on every tick).
   * undefined: unknown (stdin), so no bar and no ETA.
   */
  total?: number | (() => number | undefined);
  /** The amount done so far. Called from a timer, at most FPS times a second. */
  poll: () => number;
  /** Default process.stderr. */
  stream?: ProgressStream;
  /** false: draw nothing (e.g. the verb streams its output to the same terminal). Default true. */
  enabled?: boolean;
  /** More counts for the line after the amount, e.g. "1,204 sent · 3 errors"; read on every redraw. */
  detail?: () => string;
}

export interface Progress {
  /** Clears the line and ends the timers. Safe to call more than once. */
  stop(): void;
}

/** Redraws per second, and the polling rate. */
const FPS = 10;
/** The rate and ETA are measured over this much recent time, so they follow a change of pace. */
const RATE_WINDOW_MS = 5_000;
/** Bar width bounds, in columns. */
const BAR_MIN = 10;
const BAR_MAX = 30;

const NO_PROGRESS: Progress = { stop() {} };

interface Frame {
  label: string;
  unit: ProgressUnit;
  /** Per second; undefined until two samples exist. */
  rate: number | undefined;
  known: boolean;
  detail: (() => string) | undefined;
}

/** `value` with its unit: "1.2 GiB", "6.5 k requests". */
function amount(value: number, unit: ProgressUnit): string {
  return unit === 'bytes' ? formatBytes(value) : formatCount(value, unit);
}

/** "6.5 k / 12.4 k requests": the unit once, after the total. */
function amountOf(value: number, total: number, unit: ProgressUnit): string {
  return unit === 'bytes'
    ? `${formatBytes(value)} / ${formatBytes(total)}`
    : `${formatCount(value)} / ${formatCount(total, unit)}`;
}

/** Per second, the unit left to the amount beside it: "72.5 MiB/s", "10.5 k/s". */
function rateText(rate: number | undefined, unit: ProgressUnit): string {
  if (rate === undefined) return '-/s';
  return `${unit === 'bytes' ? formatBytes(rate) : formatCount(rate)}/s`;
}

function barOf(progress: number, width: number): string {
  const done = Math.round(Math.min(1, Math.max(0, progress)) * width);
  return `${'█'.repeat(done)}${'░'.repeat(width - done)}`;
}

/** The line for one redraw: the bar takes the room the text leaves (none below BAR_MIN). */
function formatFrame(params: cliProgress.Params, frame: Frame): string {
  const { unit } = frame;
  const rate = rateText(frame.rate, unit);
  let parts: string[];
  if (frame.known) {
    const left = Math.max(0, params.total - params.value);
    const eta = left === 0 ? 'finishing' : frame.rate ? `ETA ${formatDuration(left / frame.rate)}` : 'ETA -';
    parts = [`${Math.floor(params.progress * 100)}%`, amountOf(params.value, params.total, unit), rate, eta];
  } else {
    parts = [amount(params.value, unit), rate, `${formatDuration((Date.now() - params.startTime) / 1000)} elapsed`];
  }
  const detail = frame.detail?.();
  if (detail) parts.splice(frame.known ? 2 : 1, 0, detail);
  const text = parts.join(' · ');
  const width = Math.max(1, params.maxWidth - 1); // the last column would wrap on some terminals
  const room = Math.min(BAR_MAX, width - frame.label.length - text.length - 2);
  const line =
    frame.known && room >= BAR_MIN
      ? `${frame.label} ${barOf(params.progress, room)} ${text}`
      : `${frame.label} ${text}`;
  return line.slice(0, width);
}

/** Starts drawing; see the module header for when it draws nothing. */
export function startProgress(options: ProgressOptions): Progress {
  const stream = options.stream ?? process.stderr;
  if (options.enabled === false || stream.isTTY !== true) return NO_PROGRESS;
  const totalOf = (): number | undefined => {
    const total = typeof options.total === 'function' ? options.total() : options.total;
    return total !== undefined && Number.isFinite(total) && total >= 0 ? total : undefined;
  };
  const frame: Frame = {
    label: options.label,
    unit: options.unit,
    rate: undefined,
    known: false,
    detail: options.detail,
  };
  const bar = new cliProgress.SingleBar({
    stream: stream as NodeJS.WritableStream,
    fps: FPS,
    format: (_options, params) => formatFrame(params, frame),
    clearOnComplete: true,
    hideCursor: false,
    linewrap: true,
    gracefulExit: false,
  });
  const samples: Array<{ at: number; value: number }> = [];
  const tick = (): void => {
    const at = Date.now();
    const value = options.poll();
    const total = totalOf();
    frame.known = total !== undefined;
    if (total !== undefined && total !== bar.getTotal()) bar.setTotal(total);
    samples.push({ at, value });
    while (samples.length > 2 && at - samples[1]!.at >= RATE_WINDOW_MS) samples.shift();
    const first = samples[0]!;
    frame.rate = at > first.at ? ((value - first.value) * 1000) / (at - first.at) : undefined;
    bar.update(value);
  };
  const initial = totalOf();
  frame.known = initial !== undefined;
  const start = { at: Date.now(), value: options.poll() };
  samples.push(start);
  bar.start(initial ?? 0, start.value);
  const timer = setInterval(tick, 1000 / FPS);
  timer.unref();
  let stopped = false;
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      clearInterval(timer);
      tick(); // the last frame (drawn, then cleared, by bar.stop) shows where the work ended
      bar.stop();
    },
  };
}

/** Runs `work` with a progress line, stopping it (the line cleared) whether `work` succeeds or throws. */
export async function withProgress<T>(options: ProgressOptions, work: () => Promise<T>): Promise<T> {
  const progress = startProgress(options);
  try {
    return await work();
  } finally {
    progress.stop();
  }
}
