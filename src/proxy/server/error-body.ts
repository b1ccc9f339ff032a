/**
 * Error bodies in the format of the API the client called (ErrorFormat):
 * - OpenAI's (chat, completions, responses, every other route):
 *     {"error":{"message":"…","type":"invalid_request_error","param":null,"code":null}}
 *   Client mistakes (4xx) are `invalid_request_error`; the proxy's and the fleet's failures (5xx,
 *   and 429 when the fleet is at its admission limit) are `server_error` with a stable `code`
 *   clients can branch on.
 * - Anthropic's (`/v1/messages`):
 *     {"type":"error","error":{"type":"invalid_request_error","message":"…"}}
 *   with Anthropic's types by status (anthropicErrorType); the stable code leads the message.
 *
 * Client input in messages: anything the client sent (a model name, a header value, a path, a
 * field) is quoted through echo(), which keeps its first ECHO_CHARS characters and says how long
 * the rest was, so a 60 MB model name gets a short 404, not a 60 MB one. errorJson() caps the
 * whole message at MAX_MESSAGE_CHARS as well, for any message that quotes input another way.
 */

import { anthropicErrorBody } from '../../tokenize/api-requests.js';

export type ErrorType = 'invalid_request_error' | 'server_error';

/** Which API's error shape a body takes (see the header). */
export type ErrorFormat = 'openai' | 'anthropic';

/** The Anthropic error body of a status and message; `code` (the proxy's stable code) leads the message. */
export function anthropicErrorJson(status: number, message: string, code: string | null): string {
  const text = echo(code === null ? message : `${code}: ${message}`, MAX_MESSAGE_CHARS);
  return JSON.stringify(anthropicErrorBody(status, text));
}

/** Stable `code`s of the proxy's own errors. */
export type ProxyErrorCode =
  | 'invalid_json'
  | 'missing_field'
  | 'invalid_field'
  | 'body_too_large'
  | 'not_found'
  | 'method_not_allowed'
  | 'no_healthy_backend'
  | 'upstream_error'
  | 'upstream_timeout'
  | 'upstream_interrupted'
  | 'queue_full'
  | 'queue_timeout'
  | 'rate_limited'
  | 'shed'
  | 'model_not_found'
  | 'bad_request'
  | 'headers_too_large'
  | 'unsupported_protocol'
  | 'unsupported_encoding'
  | 'request_timeout'
  | 'shutting_down'
  | 'body_budget_exceeded';

/** The most echo() quotes of one client value. */
export const ECHO_CHARS = 200;

/** The most an error message carries, however it was made. */
export const MAX_MESSAGE_CHARS = 2048;

/**
 * A client's value as messages and log lines quote it: as is up to `max` characters, else its
 * first `max` characters, `…` and its whole length (`… (60000000 bytes)`, UTF-8 bytes).
 */
export function echo(value: string, max = ECHO_CHARS): string {
  if (value.length <= max) return value;
  // Never end on the first half of a surrogate pair (a lone surrogate is not text).
  const cut = value.charCodeAt(max - 1) >= 0xd800 && value.charCodeAt(max - 1) <= 0xdbff ? max - 1 : max;
  return `${value.slice(0, cut)}… (${Buffer.byteLength(value, 'utf8')} bytes)`;
}

export function errorJson(
  message: string,
  type: ErrorType,
  code: ProxyErrorCode | null,
  param: string | null = null,
): string {
  return JSON.stringify({ error: { message: echo(message, MAX_MESSAGE_CHARS), type, param, code } });
}

/** HTTP status lines uWS wants verbatim ("413 Payload Too Large"). */
export const STATUS_LINES: Record<number, string> = {
  200: '200 OK',
  400: '400 Bad Request',
  404: '404 Not Found',
  405: '405 Method Not Allowed',
  408: '408 Request Timeout',
  413: '413 Payload Too Large',
  415: '415 Unsupported Media Type',
  429: '429 Too Many Requests',
  431: '431 Request Header Fields Too Large',
  499: '499 Client Closed Request',
  500: '500 Internal Server Error',
  502: '502 Bad Gateway',
  503: '503 Service Unavailable',
  504: '504 Gateway Timeout',
  505: '505 HTTP Version Not Supported',
};

/** `200 OK`-style status line for any code (upstream statuses pass through with their text). */
export function statusLine(status: number, text?: string): string {
  if (text !== undefined && text !== '') return `${status} ${text}`;
  return STATUS_LINES[status] ?? String(status);
}

/**
 * A request the proxy refuses, with its status and OpenAI error body. `logMessage` is what the
 * operator's log records instead of the message, when it may say more than a client should see
 * (a backend's URL: exchange/upstream-errors.ts).
 */
export class ClientError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: ProxyErrorCode,
    readonly param: string | null = null,
    readonly logMessage: string = message,
  ) {
    super(message);
  }

  /** The Retry-After of a 429 or 503, whole seconds (at least 1). */
  retryAfterSeconds = 1;

  body(format: ErrorFormat = 'openai'): string {
    if (format === 'anthropic') return anthropicErrorJson(this.status, this.message, this.code);
    return errorJson(
      this.message,
      this.status >= 500 || this.status === 429 ? 'server_error' : 'invalid_request_error',
      this.code,
      this.param,
    );
  }
}
