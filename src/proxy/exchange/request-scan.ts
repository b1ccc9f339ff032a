/**
 * The proxy's native path from a request body to what routing and forwarding need: one addon
 * call over the raw bytes (src/core/request-scanner.ts) instead of JSON.parse on the event loop.
 *
 * Contract: scanRequest(endpoint, bytes, sessionHeader, strip, chunkBytes) returns, or throws,
 * exactly what hashParsedRequest(parseRequest(endpoint, bytes, sessionHeader, strip), chunkBytes)
 * returns or throws (request-inputs.ts):
 * - the same ClientError status (400), `code` and `param`, and the same message, except the
 *   detail after "the request body is not valid JSON: ", which names simdjson's finding;
 * - a message promptText() refuses ("messages[3].role must be a string, got 5") is a 400
 *   invalid_field with param `messages` here, up front. (With parseRequest alone it surfaces
 *   later, from router.route(), as a 400 invalid_field prefixed `request.` with no param.)
 * - on success: the same model, stream, session, priority, output cap (maxTokens), block ids (bit
 *   for bit), token counts, and bytes to forward: the original bytes, or with --strip-extensions
 *   and `hash_ids` present the original bytes minus the `hash_ids` member(s) and their commas
 *   (parseRequest re-serialises instead; the two parse to the same value).
 * Where exact fidelity would need JavaScript's own parser the scanner answers "fallback" and this
 * runs the JavaScript path for that request (docs/hashing.md lists the cases). With
 * KVROUTE_NATIVE=0 (as the process started) every request takes the JavaScript path.
 *
 * Route inputs: the body's `hash_ids` as `route.hashIds` (a Float64Array; the router counts its
 * blockSize per id), else the prompt's ids as `route.hashIds` (a BigUint64Array) with
 * `route.inputTokens` and `route.blockTokens` (chunkBytes / 4, for RouteRequest.blockTokens).
 */
import { nativeDisabledByEnv } from '../../core/native.js';
import { scanBody, scanBodyAsync, type ScanResult } from '../../core/request-scanner.js';
import { ClientError } from '../server/error-body.js';
import {
  hashParsedRequest,
  parseRequest,
  scannedNatively,
  type Endpoint,
  type ParsedRequest,
  type ParsedRoute,
} from './request-inputs.js';

/**
 * Up to this size a synchronous scan (scanRequest) costs the event loop about what settling a
 * threadpool scan does (~25 µs) and saves the round trip; larger bodies are worth
 * scanRequestAsync. bench/proxy-body-size.mjs: 50 KiB sync 24 µs, async 25 µs; 205 KiB 95 µs vs
 * 22 µs.
 */
export const SYNC_SCAN_MAX_BYTES = 64 * 1024;

/** KVROUTE_NATIVE=0, read once (a process.env lookup costs about a microsecond per request). */
let jsOnly: boolean | undefined;
const javascriptOnly = (): boolean => (jsOnly ??= nativeDisabledByEnv());

/** The JavaScript path: what the scanner must equal, and what it falls back to. */
function parseInJs(
  endpoint: Endpoint,
  bytes: Buffer,
  sessionHeader: string,
  stripExtensions: boolean,
  chunkBytes: number,
): ParsedRequest {
  return hashParsedRequest(parseRequest(endpoint, bytes, sessionHeader, stripExtensions), chunkBytes);
}

/** The scanner's answer as parseRequest's, or undefined for a fallback. */
function toParsed(result: ScanResult, bytes: Buffer, sessionHeader: string): ParsedRequest | undefined {
  if (result.kind === 'fallback') return undefined;
  if (result.kind === 'error') throw new ClientError(400, result.message, result.code, result.param);
  const ids = result.ids;
  const route: ParsedRoute =
    ids.kind === 'prompt'
      ? { hashIds: ids.hashIds, inputTokens: ids.inputTokens, blockTokens: ids.blockTokens, idsFrom: 'text' }
      : { hashIds: ids.hashIds };
  const session = sessionHeader !== '' ? sessionHeader : (result.user ?? '');
  if (session !== '') route.session = session;
  const forward = result.forward;
  return {
    model: result.model,
    route,
    body: forward === undefined ? bytes : Buffer.from(forward.buffer, forward.byteOffset, forward.byteLength),
    stream: result.stream,
    priority: result.priority,
    maxTokens: result.maxTokens,
  };
}

/**
 * Parses, checks and hashes a body on this thread (for bodies up to SYNC_SCAN_MAX_BYTES); throws
 * ClientError (400) naming the field. `chunkBytes` is the router's hashChunkBytes.
 */
export function scanRequest(
  endpoint: Endpoint,
  bytes: Buffer,
  sessionHeader: string,
  stripExtensions: boolean,
  chunkBytes = 128,
): ParsedRequest {
  if (javascriptOnly() || !scannedNatively(endpoint))
    return parseInJs(endpoint, bytes, sessionHeader, stripExtensions, chunkBytes);
  return (
    toParsed(scanBody(endpoint, bytes, chunkBytes, stripExtensions), bytes, sessionHeader) ??
    parseInJs(endpoint, bytes, sessionHeader, stripExtensions, chunkBytes)
  );
}

/**
 * scanRequest() with the parse and the hashing on the libuv threadpool: the event loop pays for
 * the call and the promise only. Rejects with ClientError (400) as scanRequest() throws. `bytes`
 * must stay alive and unchanged until the promise settles. A fallback runs the JavaScript path on
 * the event loop.
 */
export async function scanRequestAsync(
  endpoint: Endpoint,
  bytes: Buffer,
  sessionHeader: string,
  stripExtensions: boolean,
  chunkBytes = 128,
): Promise<ParsedRequest> {
  if (javascriptOnly() || !scannedNatively(endpoint))
    return parseInJs(endpoint, bytes, sessionHeader, stripExtensions, chunkBytes);
  const result = await scanBodyAsync(endpoint, bytes, chunkBytes, stripExtensions);
  return (
    toParsed(result, bytes, sessionHeader) ?? parseInJs(endpoint, bytes, sessionHeader, stripExtensions, chunkBytes)
  );
}
