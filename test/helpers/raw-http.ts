/**
 * Raw HTTP/1.x over a loopback socket, for requests no HTTP client will send (HTTP/1.0, no
 * Host, dozens of headers, garbage): writes the bytes, then reads one response framed by its
 * Content-Length (or the connection's close). Bounded: rejects with what arrived after
 * `timeoutMs` without a whole response, so a server that holds the socket fails the test.
 */
import { connect } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The server closed the connection after the response. */
  closed: boolean;
}

export function rawRequest(port: number, request: string, timeoutMs = 3_000): Promise<RawResponse> {
  const head = request.startsWith('HEAD ');
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let settled = false;
    const finish = (error?: Error) => {
      if (settled) return;
      const parsed = error === undefined ? parse(data, head) : undefined;
      if (error === undefined && parsed === undefined) return; // not whole yet
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (parsed !== undefined) resolve({ ...parsed, closed: socket.readableEnded });
      else reject(error);
    };
    const timer = setTimeout(
      () => finish(new Error(`no whole response in ${timeoutMs} ms; got ${JSON.stringify(data.toString('latin1'))}`)),
      timeoutMs,
    );
    socket.on('error', (error) => finish(error));
    socket.on('data', (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      finish();
    });
    socket.on('end', () => {
      const parsed = parse(data, head, true);
      if (parsed === undefined) finish(new Error(`connection closed with ${JSON.stringify(data.toString('latin1'))}`));
      else {
        settled = true;
        clearTimeout(timer);
        resolve({ ...parsed, closed: true });
      }
    });
    socket.write(request);
  });
}

/** One response, or undefined until it is whole; a response to HEAD has no body whatever its length says. */
function parse(data: Buffer, head: boolean, ended = false): Omit<RawResponse, 'closed'> | undefined {
  const text = data.toString('latin1');
  const headEnd = text.indexOf('\r\n\r\n');
  if (headEnd < 0) return undefined;
  const [statusLine, ...lines] = text.slice(0, headEnd).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const body = data.subarray(Buffer.byteLength(text.slice(0, headEnd + 4), 'latin1'));
  const status = Number(statusLine!.split(' ')[1]);
  if (head) return { status, headers, body: '' };
  const length = headers['content-length'];
  if (length !== undefined) {
    if (body.length < Number(length)) return undefined;
    return { status, headers, body: body.subarray(0, Number(length)).toString() };
  }
  if (!ended) return undefined;
  return { status, headers, body: body.toString() };
}
