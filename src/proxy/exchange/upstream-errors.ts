/**
 * What an upstream attempt's failure was, from undici's error codes and the socket errnos (the
 * lean h1 client raises the same codes): the observer's kind, and whether it counts against the
 * backend's health (a refused connect, a timeout or a reset does; the proxy closing its own pool
 * does not). And how a client is told of it.
 *
 * Clients never see a backend's URL in an error body: it is an internal address. They see the
 * backend's name (backendName: `backend-` and 8 hex digits of the URL's SHA-256, the same on
 * every thread and across restarts; GET /admin/state lists it beside the URL), and the error's
 * text with every address in it replaced by that name (undici's connect timeout and the socket
 * errors quote `host:port`). The operator's log keeps the URL and the unedited text
 * (ClientError.logMessage); /metrics labels keep the URL.
 */
import { createHash } from 'node:crypto';

import type { UpstreamErrorKind } from '../observe/proxy-observer.js';
import { ClientError } from '../server/error-body.js';

/** undici error codes and errnos → the observer's kind; `trips` = counts against the backend. */
export function classifyUpstreamError(error: Error): { kind: UpstreamErrorKind; trips: boolean } {
  const code = (error as { code?: string }).code;
  switch (code) {
    case 'ECONNREFUSED':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return { kind: 'refused', trips: true };
    case 'UND_ERR_CONNECT_TIMEOUT':
      return { kind: 'connect_timeout', trips: true };
    case 'UND_ERR_HEADERS_TIMEOUT':
      return { kind: 'first_byte_timeout', trips: true };
    case 'UND_ERR_BODY_TIMEOUT':
      return { kind: 'idle_timeout', trips: true };
    case 'UND_ERR_SOCKET':
    case 'ECONNRESET':
    case 'EPIPE':
      return { kind: 'reset', trips: true };
    default:
      // UND_ERR_CLOSED / UND_ERR_DESTROYED (pool closing), invalid arguments: not the engine's fault.
      return { kind: 'error', trips: false };
  }
}

const names = new Map<string, string>();

/** The name clients see for the backend whose id (URL) is `id`. */
export function backendName(id: string): string {
  let name = names.get(id);
  if (name === undefined) {
    name = `backend-${createHash('sha256').update(id).digest('hex').slice(0, 8)}`;
    if (names.size > 10_000) names.clear(); // ids come from configuration and /admin: bounded in practice
    names.set(id, name);
  }
  return name;
}

const URLS = /\b[a-z][a-z0-9+.-]*:\/\/[^\s,;()]+/gi;
const IPV4 = /\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b/g;
const IPV6 = /\[[0-9a-f:.]*:[0-9a-f:.]*\](?::\d{1,5})?|(?<![\w:])(?:[0-9a-f]{0,4}:){2,7}[0-9a-f.]*(?::\d{1,5})?/gi;

/** `text` with the backend's URL, host and any other address in it replaced by `name`. */
export function withoutAddresses(text: string, id: string, name: string): string {
  let out = text.split(id).join(name);
  const url = URL.canParse(id) ? new URL(id) : undefined;
  if (url !== undefined) for (const part of [url.host, url.hostname]) if (part !== '') out = out.split(part).join(name);
  return out.replace(URLS, name).replace(IPV4, name).replace(IPV6, name);
}

/**
 * The 502/504 for an attempt on backend `id` that failed with `error` (`when`: before responding,
 * or mid-response): the client's message names the backend and quotes no address; the log's keeps both.
 */
export function upstreamFailure(
  status: 502 | 504,
  code: 'upstream_error' | 'upstream_timeout' | 'upstream_interrupted',
  id: string,
  when: 'before responding' | 'mid-response',
  kind: UpstreamErrorKind,
  error: Error,
  suffix = '',
): ClientError {
  const name = backendName(id);
  const detail = withoutAddresses(error.message, id, name);
  return new ClientError(
    status,
    `upstream ${name} failed ${when} (${kind}: ${detail})${suffix}`,
    code,
    null,
    `upstream ${id} failed ${when} (${kind}: ${error.message})${suffix}`,
  );
}
