/**
 * OpenAI-style error bodies, the only error shape the proxy sends:
 *   {"error":{"message":"…","type":"invalid_request_error","param":null,"code":null}}
 * Client mistakes (4xx) are `invalid_request_error`; the proxy's and the fleet's failures (5xx,
 * and 429 when the fleet is at its admission limit) are `server_error` with a stable `code`
 * clients can branch on.
 */

export type ErrorType = 'invalid_request_error' | 'server_error';

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
  | 'model_not_found'
  | 'bad_request'
  | 'headers_too_large'
  | 'unsupported_protocol'
  | 'unsupported_encoding'
  | 'request_timeout'
  | 'shutting_down'
  | 'body_budget_exceeded';

export function errorJson(
  message: string,
  type: ErrorType,
  code: ProxyErrorCode | null,
  param: string | null = null,
): string {
  return JSON.stringify({ error: { message, type, param, code } });
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

/** A request the proxy refuses, with its status and OpenAI error body. */
export class ClientError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: ProxyErrorCode,
    readonly param: string | null = null,
  ) {
    super(message);
  }

  body(): string {
    return errorJson(
      this.message,
      this.status >= 500 || this.status === 429 ? 'server_error' : 'invalid_request_error',
      this.code,
      this.param,
    );
  }
}
