/**
 * Errors of the trace layer, in the codebase's convention (a stable `code`, a message that
 * names the field and the reason). Bad options use core's `invalidValue`/`invalidType`: the
 * trace layer imports only the leaf helpers `src/core/errors.ts` and `src/core/validate.ts`.
 */
import type { KvrouteError } from '../core/errors.js';

/** Bad options, for the modules that may import the trace layer but not core (analysis). */
export { invalidValue } from '../core/errors.js';

/** A bad line of a trace file: names the file's line number (1-based) and the field. */
export class TraceFormatError extends Error implements KvrouteError {
  readonly code = 'ERR_KVROUTE_TRACE_FORMAT' as const;
  constructor(
    readonly line: number,
    readonly field: string | undefined,
    reason: string,
    readonly source = '',
  ) {
    super(`${source === '' ? '' : `${source}:`}line ${line}: ${field === undefined ? '' : `${field}: `}${reason}`);
    this.name = 'TraceFormatError';
  }
}

/** A file that cannot be read or written, with the system's reason. */
export function ioError(path: string, cause: unknown): Error & KvrouteError {
  const reason = (cause as NodeJS.ErrnoException).code ?? (cause as Error).message;
  return Object.assign(new Error(`${path}: ${reason}`, { cause }), { code: 'ERR_KVROUTE_TRACE_IO' as const });
}

/** Bytes that cannot be decoded (a corrupt or truncated gzip stream): the same code as I/O errors. */
export function decodeError(message: string, cause: unknown): Error & KvrouteError {
  return Object.assign(new Error(message, { cause }), { code: 'ERR_KVROUTE_TRACE_IO' as const });
}

/** A trace with no requests in it: every analysis of it would be zeros, so it is refused. */
export class TraceEmptyError extends Error implements KvrouteError {
  readonly code = 'ERR_KVROUTE_TRACE_EMPTY' as const;
  constructor(source: string, blankLines: boolean) {
    super(`${source} holds no requests (${blankLines ? 'only blank lines' : 'the input is empty'})`);
    this.name = 'TraceEmptyError';
  }
}
