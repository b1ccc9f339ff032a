/**
 * Errors of the trace layer. They follow the codebase's convention (a stable `code`, a message
 * that names the field and the reason) so `isKvrouteError` recognises them, but this module
 * imports nothing: `src/trace/` depends on no other kvroute module.
 */

export type TraceErrorCode = 'ERR_KVROUTE_TRACE_FORMAT' | 'ERR_KVROUTE_INVALID_ARG_VALUE' | 'ERR_KVROUTE_TRACE_IO';

export interface TraceError extends Error {
  code: TraceErrorCode;
}

/** A bad line of a trace file: names the file's line number (1-based) and the field. */
export class TraceFormatError extends Error implements TraceError {
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

/** A bad option of a trace operation (generator, transform, reader). */
export function invalidOption(field: string, expected: string, got: unknown): RangeError & TraceError {
  const shown = typeof got === 'string' ? JSON.stringify(got) : Array.isArray(got) ? 'an array' : String(got);
  return Object.assign(new RangeError(`${field} must be ${expected}, got ${shown}`), {
    code: 'ERR_KVROUTE_INVALID_ARG_VALUE' as const,
  });
}

/** A file that cannot be read or written, with the system's reason. */
export function ioError(path: string, cause: unknown): Error & TraceError {
  const reason = (cause as NodeJS.ErrnoException).code ?? (cause as Error).message;
  return Object.assign(new Error(`${path}: ${reason}`, { cause }), { code: 'ERR_KVROUTE_TRACE_IO' as const });
}
