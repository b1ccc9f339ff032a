/**
 * The input files a verb reads, checked before any work starts, so that a missing or wrong path
 * is a usage error (exit 2) that names the verb, the path, what was expected and why it failed,
 * not a bare errno (`nope.jsonl: ENOENT`) after a progress bar. Also: the trace given either as
 * the operand (`sim run t.jsonl`) or as `--trace t.jsonl`, as `analyze trace IN` takes it.
 *
 * Hazard: a check before opening races with the file system; the reader's own errors still
 * apply afterwards. `-` (stdin) is never checked here.
 */
import { statSync } from 'node:fs';

import { stringFlag, UsageError, type OptionValues } from './common.js';

/** What went wrong with a path, in words, with the system's code for searching. */
const REASONS: Record<string, string> = {
  ENOENT: 'no such file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  ENOTDIR: 'a part of the path is not a directory',
  ELOOP: 'too many symbolic links',
};

/**
 * Refuses `path` unless it is a readable regular file (or `-`). `what` says what the verb
 * expected there, e.g. "a trace file (JSON lines, optionally .gz), e.g. data/mooncake_synthetic_trace.jsonl".
 */
export function checkInputFile(verb: string, path: string, what: string): void {
  if (path === '-') return;
  let reason: string | undefined;
  try {
    if (statSync(path).isDirectory()) reason = 'is a directory';
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    reason = `${REASONS[code] ?? 'cannot be read'}${code === '' ? '' : ` (${code})`}`;
  }
  if (reason !== undefined) throw new UsageError(`${verb} expected ${what} at ${path}: ${reason}`);
}

/** What a trace input is, for the messages of the verbs that read one. */
export const TRACE_FILE = 'a trace file (JSON lines, optionally .gz; e.g. data/mooncake_synthetic_trace.jsonl)';

/** What a record file is, for the messages of the verbs that read one. */
export const RECORD_FILE = 'a record file (written by sim run --records or replay --records)';

/**
 * The trace of a verb that takes it as `--trace IN` or as its operand; both at once must agree.
 * Undefined when neither was given.
 */
export function traceOperand(verb: string, values: OptionValues, operands: readonly string[]): string | undefined {
  const flag = stringFlag(values, 'trace');
  const operand = operands[0];
  if (flag !== undefined && operand !== undefined && flag !== operand)
    throw new UsageError(`${verb} got two traces, --trace ${flag} and ${operand}: give one`);
  return flag ?? operand;
}

/** `values` with the operand trace as `--trace`, for the verbs whose options read the flag. */
export function withTraceOperand(verb: string, values: OptionValues, operands: readonly string[]): OptionValues {
  const trace = traceOperand(verb, values, operands);
  return trace === undefined ? values : { ...values, trace };
}
