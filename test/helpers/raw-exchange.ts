/**
 * Raw bytes in, every response out: writes `request` on a loopback socket (several pipelined
 * requests, a smuggling shape) and collects the responses framed by their Content-Length until
 * `responses` arrived, the server closed the connection, or `timeoutMs` passed (never a failure
 * here: the caller asserts what came). Bounded, and the socket is always destroyed.
 */
import { connect } from 'node:net';

export interface RawResponses {
  /** Each whole response: status, lowercase headers, body. */
  responses: Array<{ status: number; headers: Record<string, string>; body: string }>;
  /** Bytes after the last whole response. */
  rest: string;
  /** The server closed (or reset) the connection. */
  closed: boolean;
  /** ms from the write to the end of the collection. */
  ms: number;
}

export function rawExchange(
  port: number,
  request: string,
  { responses = Infinity, timeoutMs = 3_000 }: { responses?: number; timeoutMs?: number } = {},
): Promise<RawResponses> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    const socket = connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let closed = false;
    let settled = false;
    const finish = () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ ...splitResponses(data), closed, ms: performance.now() - t0 });
    };
    const timer = setTimeout(finish, timeoutMs);
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      if (splitResponses(data).responses.length >= responses) finish();
    });
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.on('error', () => {
      closed = true;
      finish();
    });
    socket.write(request);
  });
}

function splitResponses(data: Buffer): Pick<RawResponses, 'responses' | 'rest'> {
  const responses: RawResponses['responses'] = [];
  let text = data.toString('latin1');
  for (;;) {
    const headEnd = text.indexOf('\r\n\r\n');
    if (headEnd < 0) break;
    const [statusLine, ...lines] = text.slice(0, headEnd).split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const length = Number(headers['content-length'] ?? 0);
    if (text.length < headEnd + 4 + length) break;
    responses.push({
      status: Number(statusLine!.split(' ')[1]),
      headers,
      body: text.slice(headEnd + 4, headEnd + 4 + length),
    });
    text = text.slice(headEnd + 4 + length);
  }
  return { responses, rest: text };
}
