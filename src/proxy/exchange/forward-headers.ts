/**
 * Which headers cross the proxy, each way.
 *
 * Request → engine: everything except hop-by-hop headers (connection, keep-alive,
 * transfer-encoding, upgrade, te, trailer, proxy-*, and any header the Connection header
 * names), host (undici sets the backend's), content-length and expect (undici frames the body
 * it sends, which may be re-serialised), content-encoding (a compressed body is sent decoded;
 * request-encoding.ts), and every incoming `x-kvroute-*` header (those are the
 * proxy's to set; a client must not spoof them to an engine or a log).
 *
 * Engine → client: the same hop-by-hop set, plus content-length (uWS frames the response) and
 * date (uWS writes its own); `x-kvroute-*` from upstream is replaced by the proxy's own.
 *
 * The request side runs inside the uWS handler (the HttpRequest is valid only there) and
 * builds one flat [name, value, …] array, the form undici takes without conversion.
 */
import type { FlowHeaders } from '../../flow/flow-identity.js';
import type { ClientRequestHead } from '../server/client-io.js';

const DROPPED = new Set([
  'connection',
  'keep-alive',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
  'host',
  'content-length',
  'expect',
]);

// A compressed request body is sent decoded (request-encoding.ts), so its coding is not forwarded.
const DROPPED_REQUEST = new Set([...DROPPED, 'content-encoding']);

// uWS writes its own `date` and `uWebSockets` headers; an engine's copies (a uWS upstream) would repeat them.
const DROPPED_RESPONSE = new Set([...DROPPED, 'date', 'uwebsockets']);

function isDropped(name: string, set: Set<string>): boolean {
  return set.has(name) || name.startsWith('proxy-') || name.startsWith('x-kvroute-');
}

/** The request id header: the client's is kept, else the proxy makes one (proxy-exchange.ts). */
export const REQUEST_ID = 'x-request-id';

export interface IncomingHead {
  /** Flat [name, value, …] to forward. */
  headers: string[];
  /**
   * The session: the non-empty value of the best-ranked session header present (session-headers.ts),
   * '' if none.
   */
  session: string;
  /** The declared body length, or -1. */
  contentLength: number;
  /** The client's `x-request-id` ('' if absent); forwarded like any other header. */
  requestId: string;
  /** The body's Content-Encoding ('' if absent). */
  contentEncoding: string;
  /** What flow control reads: tenant, priority and deadline headers, the API key's ('' if absent). */
  flow: FlowHeaders;
}

/** The names of flow control's headers (lower case; flow-config.ts). */
export interface FlowHeaderNames {
  tenantHeader: string;
  priorityHeader: string;
  deadlineHeader: string;
}

/** Copies what the upstream request needs out of a uWS request (call synchronously in the handler). */
export function readIncomingHead(
  req: ClientRequestHead,
  sessionRanks: ReadonlyMap<string, number>,
  flowNames: FlowHeaderNames,
): IncomingHead {
  const flow: FlowHeaders = { tenant: '', priority: '', deadline: '', authorization: '', apiKey: '' };
  const headers: string[] = [];
  let session = '';
  let sessionRank = Infinity;
  let contentLength = -1;
  let connection = '';
  let requestId = '';
  let contentEncoding = '';
  req.forEach((name, value) => {
    const rank = sessionRanks.get(name);
    if (rank !== undefined && rank < sessionRank && value !== '') {
      session = value;
      sessionRank = rank;
    }
    if (name === REQUEST_ID) requestId = value;
    if (name === 'content-encoding') contentEncoding = value;
    if (name === flowNames.tenantHeader) flow.tenant = value;
    else if (name === flowNames.priorityHeader) flow.priority = value;
    else if (name === flowNames.deadlineHeader) flow.deadline = value;
    else if (name === 'authorization') flow.authorization = value;
    else if (name === 'x-api-key') flow.apiKey = value;
    if (name === 'content-length') contentLength = /^\d+$/.test(value) ? Number(value) : -1;
    else if (name === 'connection') connection = value;
    if (!isDropped(name, DROPPED_REQUEST)) headers.push(name, value);
  });
  if (connection !== '' && connection !== 'keep-alive' && connection !== 'close') {
    // Headers the client declared hop-by-hop (RFC 9110 §7.6.1) are not forwarded either.
    const named = new Set(
      connection
        .toLowerCase()
        .split(',')
        .map((t) => t.trim()),
    );
    for (let i = headers.length - 2; i >= 0; i -= 2) if (named.has(headers[i]!)) headers.splice(i, 2);
  }
  return { headers, session, contentLength, requestId, contentEncoding, flow };
}

/**
 * The upstream response's headers worth relaying, as [name, value, …] (lowercase names), from
 * undici's raw Buffers or the h1 client's latin1 strings.
 */
export function relayedResponseHeaders(raw: readonly (Buffer | string)[]): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const rawName = raw[i]!;
    const name = (typeof rawName === 'string' ? rawName : rawName.toString('latin1')).toLowerCase();
    if (isDropped(name, DROPPED_RESPONSE)) continue;
    const value = raw[i + 1]!;
    out.push(name, typeof value === 'string' ? value : value.toString('latin1'));
  }
  return out;
}
