/**
 * Errors with stable `code`s, in the style of Node's own (`err.code ===
 * 'ERR_INVALID_ARG_TYPE'`). Messages name the offending field and the reason;
 * callers branch on `code`, never on the message.
 */

export type KvrouteErrorCode =
  | 'ERR_KVROUTE_INVALID_ARG_TYPE'
  | 'ERR_KVROUTE_INVALID_ARG_VALUE'
  | 'ERR_KVROUTE_UNKNOWN_POLICY'
  | 'ERR_KVROUTE_UNKNOWN_INSTANCE'
  | 'ERR_KVROUTE_DUPLICATE_INSTANCE'
  | 'ERR_KVROUTE_UNKNOWN_TICKET'
  | 'ERR_KVROUTE_NO_INSTANCE'
  | 'ERR_KVROUTE_NATIVE_UNAVAILABLE'
  | 'ERR_KVROUTE_TRACE_FORMAT'
  | 'ERR_KVROUTE_TRACE_IO'
  | 'ERR_KVROUTE_TRACE_EMPTY'
  | 'ERR_KVROUTE_RECORDS'
  | 'ERR_KVROUTE_REPORT'
  | 'ERR_KVROUTE_STATE_FEED'
  | 'ERR_KVROUTE_REPLAY_TARGET'
  | 'ERR_KVROUTE_KV_EVENT'
  | 'ERR_KVROUTE_TOKENIZER'
  | 'ERR_KVROUTE_TOKENIZE_INPUT'
  | 'ERR_KVROUTE_TOKENIZER_BUSY'
  | 'ERR_KVROUTE_TOKENIZER_WORKER';

export interface KvrouteError extends Error {
  code: KvrouteErrorCode;
}

function withCode<E extends Error>(error: E, code: KvrouteErrorCode): E & KvrouteError {
  return Object.assign(error, { code });
}

/** A value of the wrong type: `field` names it as the caller wrote it. */
export function invalidType(field: string, expected: string, got: unknown): TypeError & KvrouteError {
  return withCode(new TypeError(`${field} must be ${expected}, got ${describe(got)}`), 'ERR_KVROUTE_INVALID_ARG_TYPE');
}

/** A value of the right type outside its allowed range. */
export function invalidValue(field: string, expected: string, got: unknown): RangeError & KvrouteError {
  return withCode(
    new RangeError(`${field} must be ${expected}, got ${describe(got)}`),
    'ERR_KVROUTE_INVALID_ARG_VALUE',
  );
}

export function rangeError(code: KvrouteErrorCode, message: string): RangeError & KvrouteError {
  return withCode(new RangeError(message), code);
}

export function stateError(code: KvrouteErrorCode, message: string): Error & KvrouteError {
  return withCode(new Error(message), code);
}

/** True when `error` carries one of kvroute's codes. */
export function isKvrouteError(error: unknown): error is KvrouteError {
  return error instanceof Error && typeof (error as { code?: unknown }).code === 'string';
}

/** How an offending value is shown in a message: short, and never the whole of a big value. */
export function describe(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (typeof value === 'bigint') return `${value}n`;
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (ArrayBuffer.isView(value)) return `a ${value.constructor.name}`;
  if (typeof value === 'object') return 'an object';
  return String(value);
}
