/**
 * Request framing the uWebSockets.js server checks itself: uWS (20.30) frames a body by the first
 * `Content-Length` header and ignores any other, and takes any `Transfer-Encoding` as chunked.
 * Node's parser (llhttp) refuses both shapes with 400, because a front proxy that reads the other
 * header would see a different request boundary (request smuggling, RFC 9112 §11.2). Every uWS
 * route, the fallback and the 405s included, runs behind framingGuard(), which refuses with 400
 * `bad_request`:
 * - more than one `Content-Length` header (even with equal values, as Node does);
 * - more than one `Transfer-Encoding` header, or one whose value is not `chunked` alone
 *   (`chunked, identity`, `gzip, chunked`, `identity`).
 *
 * Hazard: the refusal cannot be written from the route handler. uWS parses the rest of the bytes
 * it already read after the handler returns, and a response ended synchronously lets the next
 * request in them (the smuggled one) be routed and answered, `Connection: close` or not. So the
 * refusal waits for setImmediate, after the parse: a request parsed behind a pending response
 * makes uWS close the connection (its pipelining rule, docs/proxy.md "Server modes"), so the
 * smuggled request is never served, and the client of such a connection gets no 400 (onAborted).
 * A refused request's body is not read (no onData: uWS drops its bytes) and its connection is
 * closed after the 400.
 *
 * What uWS refuses before any handler sees it (no answer, the connection closed): both
 * `Transfer-Encoding` and `Content-Length`; and after the handler ran (its answer dropped with the
 * connection): a `Content-Length` of 10 digits or more, or one that is not all digits.
 */
import type { ClientRequestHead, ClientResponse } from './client-io.js';
import { sendClientError } from './client-response.js';
import { ClientError } from './error-body.js';
import type { UwsGuard } from './route-table.js';

/** How much of a refused header value a message echoes. */
const ECHO_CHARS = 64;

function echo(value: string): string {
  return JSON.stringify(value.length > ECHO_CHARS ? `${value.slice(0, ECHO_CHARS)}…` : value);
}

/** Why a request's framing headers are refused, or undefined when they are sound. */
export function framingRefusal(req: ClientRequestHead): ClientError | undefined {
  let lengths = 0;
  const codings: string[] = [];
  req.forEach((name, value) => {
    if (name === 'content-length') lengths++;
    else if (name === 'transfer-encoding') codings.push(value);
  });
  if (lengths > 1)
    return new ClientError(400, `the request has ${lengths} Content-Length headers; send one`, 'bad_request');
  if (codings.length > 1)
    return new ClientError(
      400,
      `the request has ${codings.length} Transfer-Encoding headers; send one, chunked`,
      'bad_request',
    );
  if (codings.length === 1 && codings[0]!.trim().toLowerCase() !== 'chunked')
    return new ClientError(
      400,
      `Transfer-Encoding ${echo(codings[0]!)} is not supported; send chunked alone`,
      'bad_request',
    );
  return undefined;
}

/** Answers `refusal` once uWS has parsed what it holds of the connection (see the header's hazard). */
function refuseAfterParse(res: ClientResponse, refusal: ClientError): void {
  let aborted = false;
  res.onAborted(() => (aborted = true));
  setImmediate(() => {
    if (!aborted) sendClientError(res, refusal, true);
  });
}

/** `handler` behind the framing check (for the uWS server; Node's parser makes its own). */
export const framingGuard: UwsGuard = (handler) => (res, req) => {
  const refusal = framingRefusal(req);
  if (refusal === undefined) handler(res, req);
  else refuseAfterParse(res, refusal);
};
