/**
 * Small writers for whole responses on a uWS HttpResponse. Each one corks (so it is safe
 * outside the route handler: after an await, in an undici callback) and writes status,
 * headers and body in one go. Callers guarantee the response is neither aborted nor ended.
 */

import type { ClientResponse } from './client-io.js';
import { ClientError, echo, errorJson, statusLine, type ErrorFormat, type ProxyErrorCode } from './error-body.js';
import { sendJsonThenDrain } from './lingering-close.js';

/** Writes a complete JSON response. `closeConnection` for refusals whose body was never read. */
export function sendJson(
  res: ClientResponse,
  status: number,
  body: string,
  headers?: readonly string[],
  closeConnection = false,
): void {
  res.cork(() => {
    res.writeStatus(statusLine(status)).writeHeader('content-type', 'application/json');
    if (headers !== undefined)
      for (let i = 0; i + 1 < headers.length; i += 2) res.writeHeader(headers[i]!, headers[i + 1]!);
    res.end(body, closeConnection);
  });
}

/** Sends a ClientError (4xx/5xx with its OpenAI error body), with `headers` ([name, value, …]) if given. */
export function sendClientError(
  res: ClientResponse,
  error: ClientError,
  closeConnection = false,
  headers?: readonly string[],
  format: ErrorFormat = 'openai',
): void {
  sendJson(res, error.status, error.body(format), errorHeaders(error, headers), closeConnection);
}

/**
 * Sends a ClientError refusing a request whose body is still unread, then reads and discards that
 * body (bounded) and closes the connection (lingering-close.ts), so the client gets the answer.
 */
export function sendClientErrorThenDrain(
  res: ClientResponse,
  error: ClientError,
  headers?: readonly string[],
  format: ErrorFormat = 'openai',
): void {
  sendJsonThenDrain(res, error.status, error.body(format), errorHeaders(error, headers));
}

function errorHeaders(error: ClientError, headers: readonly string[] | undefined): readonly string[] | undefined {
  if (error.status !== 503 && error.status !== 429) return headers;
  return error.retryAfterSeconds === 1
    ? [...RETRY_AFTER, ...(headers ?? [])]
    : ['retry-after', String(error.retryAfterSeconds), ...(headers ?? [])];
}

/** Sent with every 503 and 429: clients (and the openai SDK) wait this many seconds before retrying. */
export const RETRY_AFTER = ['retry-after', '1'] as const;

/** The 503 the proxy sends when no backend (serving `model`, when given) can take a request. */
export function noBackendError(model?: string): ClientError {
  const which = model === undefined ? 'no healthy backend' : `no healthy backend serving ${echo(model)}`;
  return new ClientError(503, `${which} can take the request; retry shortly`, 'no_healthy_backend');
}

/** A server-side failure body (502/504) with its code. */
export function serverError(message: string, code: ProxyErrorCode): string {
  return errorJson(message, 'server_error', code);
}
