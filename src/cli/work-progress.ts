/**
 * What each long verb's progress line measures (progress.ts draws it): a trace reader's input
 * bytes against the file's size, or a synthetic trace's requests against its plan's count.
 * Both are counters the work keeps anyway, so polling them costs the work nothing.
 *
 * A verb that streams its result to stdout gets no line when stdout is the terminal the line
 * would share (`kvroute trace synth` without -o): the two would interleave.
 */
import type { TraceReader } from '../trace/read-trace.js';
import type { SynthProgress } from '../trace/synth.js';
import type { ProgressOptions } from './progress.js';

/** `output`: where the verb writes its result, '-' for stdout; omit for verbs that print a summary. */
function sharesTerminal(output: string | undefined): boolean {
  return output === '-' && process.stdout.isTTY === true;
}

/** Bytes of the trace read so far, of the file's size (unknown for stdin: amount and rate only). */
export function readerProgress(label: string, reader: TraceReader, output?: string): ProgressOptions {
  return {
    label,
    unit: 'bytes',
    total: () => reader.totalBytes,
    poll: () => reader.bytesRead,
    enabled: !sharesTerminal(output),
  };
}

/** Requests generated so far, of the trace's planned count (known once the plan is built). */
export function synthProgress(counter: SynthProgress, output: string): ProgressOptions {
  return {
    label: 'trace synth',
    unit: 'requests',
    total: () => counter.totalRequests,
    poll: () => counter.requests,
    enabled: !sharesTerminal(output),
  };
}
