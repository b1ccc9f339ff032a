/**
 * What a failed `kvroute` run prints and the exit status it ends with: 0 success (help and
 * --version included); 1 bad data (the input is wrong, not the command line); 2 bad usage;
 * 130 or 143 interrupted (SIGINT or SIGTERM stopped the run before its end).
 */
import { constants as osConstants } from 'node:os';

import { CommanderError } from 'commander';

import { isKvrouteError } from '../core/errors.js';
import { InterruptedError, UsageError } from './common.js';

/** Data errors: the input is wrong, not the command line. Every other code is a usage error. */
export const DATA_ERRORS: ReadonlySet<string> = new Set([
  'ERR_KVROUTE_TRACE_FORMAT',
  'ERR_KVROUTE_TRACE_IO',
  'ERR_KVROUTE_TRACE_EMPTY',
  'ERR_KVROUTE_RECORDS',
  'ERR_KVROUTE_REPORT',
  'ERR_KVROUTE_STATE_FEED',
]);

/**
 * The exit status for `error`, after printing it behind `prefix` (`kvroute <verb>: `).
 * Anything that is neither commander's, a UsageError nor a kvroute error is a bug: rethrown, so
 * its stack is printed.
 */
export function exitStatus(error: unknown, prefix: string): number {
  // Commander printed its message (or the help) already; its own status is 1 for every error.
  if (error instanceof CommanderError) return error.exitCode === 0 ? 0 : 2;
  if (error instanceof InterruptedError) {
    process.stderr.write(`${prefix}${error.message}\n`);
    return 128 + (osConstants.signals[error.signal] ?? 2);
  }
  if (error instanceof UsageError || isKvrouteError(error)) {
    process.stderr.write(`${prefix}${error.message}\n`);
    return DATA_ERRORS.has((error as { code?: string }).code ?? '') ? 1 : 2;
  }
  throw error;
}
