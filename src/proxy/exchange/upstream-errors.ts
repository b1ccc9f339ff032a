/**
 * What an upstream attempt's failure was, from undici's error codes and the socket errnos (the
 * lean h1 client raises the same codes): the observer's kind, and whether it counts against the
 * backend's health (a refused connect, a timeout or a reset does; the proxy closing its own pool
 * does not).
 */
import type { UpstreamErrorKind } from '../observe/proxy-observer.js';

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
