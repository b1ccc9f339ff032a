/**
 * The ZeroMQ endpoints kvroute connects to for KV events: tcp://HOST:PORT (port 1..65535, HOST a
 * name, an IPv4 address or a bracketed IPv6 one) or ipc://PATH. Checked where they are configured,
 * so a typo is refused at start, not found as a socket that never connects.
 */
const TCP = /^tcp:\/\/(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})$/;

export const ZMQ_ENDPOINT_EXPECTED = 'a ZeroMQ endpoint, tcp://HOST:PORT (port 1..65535) or ipc://PATH';

/** The endpoint, trimmed, or undefined when it is not one. */
export function parseZmqEndpoint(raw: unknown): string | undefined {
  const text = typeof raw === 'string' ? raw.trim() : '';
  const tcp = TCP.exec(text);
  if (tcp !== null) return Number(tcp[2]) >= 1 && Number(tcp[2]) <= 65535 ? text : undefined;
  return /^ipc:\/\/\S+$/.test(text) ? text : undefined;
}
