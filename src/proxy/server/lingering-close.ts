/**
 * Lingering close (nginx's name for it): a refusal sent before the request body was read (413
 * over --max-body, 503 over the body budget, 415, a draining proxy) must still reach the client.
 * Closing at once does not deliver it: the body bytes still arriving at a closed socket make the
 * kernel reset the connection, and the reset discards the answer before the client reads it.
 *
 * So the refusal's head and body are written at once (the client can read its status while it
 * is still sending), with `connection: close`; the rest of the request body is then read and
 * thrown away; the response ends once the body is over, or the connection is cut at the first
 * bound:
 * - LINGER_MAX_BYTES discarded (a client cannot make the proxy read without end);
 * - LINGER_MS from the refusal (a client dripping its body cannot hold the socket).
 * Past a bound the cut may reset a client that keeps sending: it had its answer to read first.
 *
 * Invariants: nothing is buffered (each chunk is only counted) and nothing is reserved in the body
 * budget; the response is written by this module alone from the refusal on (the exchange has
 * finished: its onData and onAborted handlers are replaced in uWS, and inert in the Node shims).
 * The response goes out with chunked framing (written before it ends).
 */
import type { ClientResponse } from './client-io.js';
import { statusLine } from './error-body.js';

/**
 * The most body bytes thrown away after a refusal. 64 MiB is the default --max-body: a client
 * sending a body of the default cap gets its answer whatever it declared, and past it the time
 * bound cuts a larger upload anyway (64 MiB takes ~50 ms on loopback, ~5 s at 100 Mbit/s).
 */
export const LINGER_MAX_BYTES = 64 * 1024 * 1024;
/** How long a refused client has to finish sending its body (nginx's lingering_timeout is 5 s). */
export const LINGER_MS = 3_000;

export interface LingerLimits {
  maxBytes: number;
  ms: number;
}

const DEFAULT_LIMITS: LingerLimits = { maxBytes: LINGER_MAX_BYTES, ms: LINGER_MS };

/**
 * Writes a JSON refusal (`headers`: [name, value, …]) now, discards the rest of the request
 * body within `limits`, then ends the response and closes the connection. Call it instead of
 * ending the response, while the response is neither ended nor aborted.
 */
export function sendJsonThenDrain(
  res: ClientResponse,
  status: number,
  body: string,
  headers: readonly string[] = [],
  limits: LingerLimits = DEFAULT_LIMITS,
): void {
  let discarded = 0;
  let over = false;
  const finish = (drained: boolean): void => {
    if (over) return;
    over = true;
    clearTimeout(timer);
    // Drained: the response ends whole (its `connection: close` has the client close; Node closes
    // itself; uWS keeps the socket until its idle timeout, as end(…, true) would write a stray
    // header into the chunked body in 20.30). Cut: closed now, whatever is still arriving.
    if (drained) res.cork(() => res.end(''));
    else res.close();
  };
  const timer = setTimeout(() => finish(false), limits.ms);
  res.onAborted(() => {
    over = true;
    clearTimeout(timer);
  });
  res.onData((chunk, isLast) => {
    if (over) return;
    discarded += chunk.byteLength;
    if (isLast) finish(true);
    else if (discarded >= limits.maxBytes) finish(false);
  });
  res.cork(() => {
    res.writeStatus(statusLine(status)).writeHeader('content-type', 'application/json');
    for (let i = 0; i + 1 < headers.length; i += 2) res.writeHeader(headers[i]!, headers[i + 1]!);
    res.writeHeader('connection', 'close');
    res.write(body);
  });
}
