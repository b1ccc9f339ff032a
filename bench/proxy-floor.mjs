// @ts-check
/**
 * The `floor` leg of the proxy benchmark (issue #6): the bare relay that any uWebSockets.js + Node
 * proxy pays before doing any work of its own, so that kvroute's figure can be split into what
 * the architecture costs (this) and what kvroute's own code costs (the rest). A bench instrument,
 * not a product path: nothing in kvroute uses it.
 *
 *   node bench/proxy-floor.mjs --backends PORT[,PORT...] [--steps headers,parse,route]
 *
 * `--backends` are the stub's loopback ports. `--steps` adds, one by one, the work any cache-aware
 * router must do per request (lib/floor-steps.mjs); bench/proxy-steps.ts measures each.
 *
 * What it does, and nothing more: a uWebSockets.js App on 127.0.0.1 (ephemeral port) reads each
 * POST's body whole, picks a backend round-robin, and sends the request over a keep-alive node:net
 * socket from that backend's idle pool (a new socket when the pool is empty) in one write: the
 * request line with the same URL, `host`, `content-type: application/json`, `content-length`, the
 * body. It parses the response just enough for what the stub sends (status line, headers, then a
 * `content-length` body or a `transfer-encoding: chunked` one) and answers the client with the
 * upstream's status and content-type (streams: also cache-control), relaying each decoded chunk
 * as it comes. A socket goes back to its pool only once its response is complete, and leaves the
 * pool as soon as the backend closes it (uWS closes connections idle for ~10 s).
 *
 * What it leaves out, and kvroute does: JSON parsing of the request, routing, metrics, header
 * forwarding, timeouts, retries, backpressure (the stub's bodies are small), anything but a
 * `200`/`404`-style upstream framed by length or chunks. So it is the lower bound of a uWS.js +
 * node:net relay, not a proxy to use: a client abort only stops the relay (the upstream response
 * is still read to its end so the socket can be reused), and an upstream socket that errors or
 * closes mid-response is answered with a 502 (or, once the status is out, a closed connection).
 *
 * Prints one line `proxy-floor: listening on 127.0.0.1:PORT` when ready; SIGTERM or SIGINT closes
 * the listener and exits 0.
 */
import net from 'node:net';
import { parseArgs } from 'node:util';

import uWS from 'uWebSockets.js';

import { floorSteps } from './lib/floor-steps.mjs';

/** @typedef {import('uWebSockets.js').HttpResponse} HttpResponse */
/**
 * One client request relayed: `started` once the status line went to the client, `aborted` once
 * the client went away (res must not be touched then), `finished` once it was answered.
 * `steps` is what the optional --steps keep on it (lib/floor-steps.mjs).
 * @typedef {{ res: HttpResponse, aborted: boolean, started: boolean, finished: boolean, steps: import('./lib/floor-steps.mjs').StepState }} Exchange
 */
/** @typedef {{ port: number, host: string, idle: Upstream[] }} Backend */

const EMPTY = Buffer.alloc(0);
const CRLF = Buffer.from('\r\n');
const HEAD_END = Buffer.from('\r\n\r\n');

// Response parser states.
const HEAD = 0; // waiting for the status line and headers
const BODY = 1; // `remaining` bytes of a content-length body
const CHUNK_SIZE = 2; // waiting for a chunk-size line
const CHUNK_DATA = 3; // `remaining` bytes of the current chunk's payload
const CHUNK_CRLF = 4; // the CRLF after a chunk's payload
const TRAILER = 5; // after the 0-chunk: trailer lines up to an empty one

/** One keep-alive socket to a backend and the parse state of the response in flight on it. */
class Upstream {
  /** @param {Backend} backend */
  constructor(backend) {
    this.backend = backend;
    this.socket = net.connect(backend.port, '127.0.0.1');
    this.socket.setNoDelay(true);
    /** @type {Exchange | null} */
    this.exchange = null;
    /** In `backend.idle`. */
    this.pooled = false;
    this.dead = false;
    /** Bytes received and not parsed yet. @type {Buffer} */
    this.buf = EMPTY;
    this.state = HEAD;
    this.remaining = 0;
    this.status = '';
    this.contentType = '';
    this.closeAfter = false;
    this.socket.on('data', (data) => this.onData(data));
    // The backend closed its side (idle timeout): never reuse this socket.
    this.socket.on('end', () => this.gone());
    this.socket.on('error', () => this.gone());
    this.socket.on('close', () => this.gone());
  }

  /** Sends one request on this socket; its response goes to `exchange`. @param {Exchange} exchange @param {Buffer} bytes */
  send(exchange, bytes) {
    this.exchange = exchange;
    this.socket.write(bytes);
  }

  /** @param {Buffer} data */
  onData(data) {
    const exchange = this.exchange;
    if (exchange === null) return this.gone(); // bytes nobody asked for
    this.buf = this.buf.length === 0 ? data : Buffer.concat([this.buf, data]);
    // A client that went away is not touched again, but its response is still read to its end.
    if (exchange.aborted) this.parse(exchange);
    else exchange.res.cork(() => this.parse(exchange));
  }

  /** Parses what is buffered, relaying to the client unless it went away. @param {Exchange} ex */
  parse(ex) {
    for (;;) {
      const buf = this.buf;
      switch (this.state) {
        case HEAD: {
          const end = buf.indexOf(HEAD_END);
          if (end < 0) return;
          if (!this.head(buf.toString('latin1', 0, end), ex)) return this.gone();
          this.buf = buf.subarray(end + 4);
          break;
        }
        case BODY: {
          if (buf.length < this.remaining) return;
          const body = buf.subarray(0, this.remaining);
          this.buf = buf.subarray(this.remaining);
          if (!ex.aborted) {
            const res = ex.res.writeStatus(this.status);
            if (this.contentType !== '') res.writeHeader('content-type', this.contentType);
            res.end(body);
          }
          return this.done(ex);
        }
        case CHUNK_SIZE: {
          const eol = buf.indexOf(CRLF);
          if (eol < 0) return;
          const size = parseInt(buf.toString('latin1', 0, eol), 16); // stops at a `;extension`
          if (!(size >= 0)) return this.gone();
          this.buf = buf.subarray(eol + 2);
          this.remaining = size;
          this.state = size === 0 ? TRAILER : CHUNK_DATA;
          break;
        }
        case CHUNK_DATA: {
          if (buf.length === 0) return;
          const n = Math.min(buf.length, this.remaining);
          if (!ex.aborted) ex.res.write(buf.subarray(0, n));
          this.buf = buf.subarray(n);
          this.remaining -= n;
          if (this.remaining === 0) this.state = CHUNK_CRLF;
          break;
        }
        case CHUNK_CRLF: {
          if (buf.length < 2) return;
          this.buf = buf.subarray(2);
          this.state = CHUNK_SIZE;
          break;
        }
        case TRAILER: {
          const eol = buf.indexOf(CRLF);
          if (eol < 0) return;
          this.buf = buf.subarray(eol + 2);
          if (eol > 0) break; // a trailer field: dropped
          if (!ex.aborted) ex.res.end();
          return this.done(ex);
        }
      }
    }
  }

  /**
   * The status line and headers: sets up the body's framing and, for a chunked body, writes the
   * status and headers to the client. False when the framing is not one this relay handles.
   * @param {string} head @param {Exchange} ex
   */
  head(head, ex) {
    const lines = head.split('\r\n');
    const statusLine = lines[0] ?? '';
    this.status = statusLine.slice(statusLine.indexOf(' ') + 1);
    this.contentType = '';
    this.closeAfter = false;
    let cacheControl = '';
    let length = -1;
    let chunked = false;
    for (let i = 1; i < lines.length; i++) {
      const line = /** @type {string} */ (lines[i]);
      const colon = line.indexOf(':');
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === 'content-length') length = Number(value);
      else if (name === 'transfer-encoding') chunked = value.toLowerCase().includes('chunked');
      else if (name === 'content-type') this.contentType = value;
      else if (name === 'cache-control') cacheControl = value;
      else if (name === 'connection') this.closeAfter = value.toLowerCase() === 'close';
    }
    if (chunked) {
      this.state = CHUNK_SIZE;
      if (!ex.aborted) {
        ex.started = true;
        const res = ex.res.writeStatus(this.status);
        if (this.contentType !== '') res.writeHeader('content-type', this.contentType);
        if (cacheControl !== '') res.writeHeader('cache-control', cacheControl);
      }
      return true;
    }
    if (!(Number.isInteger(length) && length >= 0)) return false;
    this.state = BODY;
    this.remaining = length;
    return true;
  }

  /** The response is complete: the socket goes back to its pool (or away). @param {Exchange} ex */
  done(ex) {
    ex.finished = true;
    steps.finish?.(ex.steps, true);
    this.exchange = null;
    this.state = HEAD;
    if (this.buf.length > 0 || this.closeAfter) return this.gone();
    this.pooled = true;
    this.backend.idle.push(this);
  }

  /** The socket is unusable (closed, failed or out of sync): out of the pool, its client answered. */
  gone() {
    if (this.dead) return;
    this.dead = true;
    if (this.pooled) {
      const idle = this.backend.idle;
      idle.splice(idle.indexOf(this), 1);
      this.pooled = false;
    }
    this.socket.destroy();
    const ex = this.exchange;
    this.exchange = null;
    if (ex !== null) fail(ex);
  }
}

/** The upstream failed mid-request: 502, or a closed connection once the status is out. @param {Exchange} ex */
function fail(ex) {
  steps.finish?.(ex.steps, false);
  if (ex.aborted || ex.finished) return;
  ex.finished = true;
  if (ex.started) ex.res.close();
  else ex.res.cork(() => ex.res.writeStatus('502 Bad Gateway').end('upstream failed'));
}

const { values } = parseArgs({ options: { backends: { type: 'string' }, steps: { type: 'string' } } });
const ports = (values.backends ?? '').split(',').map(Number);
if (ports.length === 0 || !ports.every((p) => Number.isInteger(p) && p > 0 && p < 65536)) {
  console.error('proxy-floor: --backends takes a comma-separated list of loopback ports');
  process.exit(2);
}
/** @type {Backend[]} */
const backends = ports.map((port) => ({ port, host: `host: 127.0.0.1:${port}\r\n`, idle: [] }));
const stepNames = (values.steps ?? '').split(',').filter((name) => name !== '');
const steps = await floorSteps(stepNames, backends.length).catch((/** @type {Error} */ error) => {
  console.error(`proxy-floor: ${error.message}`);
  process.exit(2);
});
let next = 0;

/**
 * Sends the request to a backend (the next one round-robin, or the route step's pick), on an idle
 * socket or a new one. @param {Exchange} ex @param {string} url @param {Buffer[]} parts
 */
function relay(ex, url, parts) {
  const body = parts.length === 1 ? /** @type {Buffer} */ (parts[0]) : Buffer.concat(parts);
  const picked = steps.pick?.(body, ex.steps);
  const backend = /** @type {Backend} */ (backends[picked ?? next]);
  next = (next + 1) % backends.length;
  const headers = ex.steps.forwarded ?? 'content-type: application/json\r\n';
  const head = Buffer.from(
    `POST ${url} HTTP/1.1\r\n${backend.host}${headers}content-length: ${body.length}\r\n\r\n`,
    'latin1',
  );
  let upstream = backend.idle.pop();
  if (upstream === undefined) upstream = new Upstream(backend);
  else upstream.pooled = false;
  upstream.send(ex, Buffer.concat([head, body]));
}

const app = uWS.App();
app.post('/*', (res, req) => {
  const query = req.getQuery();
  const url = query ? `${req.getUrl()}?${query}` : req.getUrl();
  /** @type {Exchange} */
  const ex = { res, aborted: false, started: false, finished: false, steps: {} };
  steps.readHead?.(req, ex.steps);
  res.onAborted(() => {
    ex.aborted = true;
  });
  /** @type {Buffer[]} */
  const parts = [];
  res.onData((chunk, isLast) => {
    parts.push(Buffer.from(chunk.slice(0))); // the chunk is invalid once this callback returns
    if (isLast) relay(ex, url, parts);
  });
});
app.any('/*', (res) => void res.writeStatus('404 Not Found').end());

app.listen('127.0.0.1', 0, (listenSocket) => {
  if (!listenSocket) {
    console.error('proxy-floor: uWS could not listen on 127.0.0.1');
    process.exit(1);
  }
  console.log(`proxy-floor: listening on 127.0.0.1:${uWS.us_socket_local_port(listenSocket)}`);
  for (const signal of /** @type {const} */ (['SIGTERM', 'SIGINT']))
    process.on(signal, () => {
      uWS.us_listen_socket_close(listenSocket);
      for (const b of backends) for (const u of [...b.idle]) u.socket.destroy();
      process.exit(0);
    });
});
