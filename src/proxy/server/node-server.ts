/**
 * The `--http node` server: the proxy's RouteTable on Node's own `http` module, for clients
 * and checkers that the uWebSockets.js build leaves unanswered (docs/proxy.md, "Server
 * modes"): HTTP/1.0 (HAProxy's and many health checkers' default, and nginx's default
 * `proxy_http_version`), a Host-less HTTP/1.1 request, more headers than uWS's compiled-in
 * limit. Every request gets an HTTP answer with an OpenAI-style JSON body:
 * - served, for HTTP/1.0 and any header count Node accepts (its default cap, 2,000 headers,
 *   ignores the rest);
 * - 400 for HTTP/1.1 without Host (RFC 9112 §3.2) and for bytes that are not HTTP;
 * - 431 when the head exceeds Node's header size limit (16 KiB by default, `--max-http-header-size`);
 * - 505 for a major version other than 1 (an HTTP/2 preface is not HTTP/1 at all: 400);
 * - 408 when a client takes longer than `headerTimeoutMs` (`--header-timeout`, 10 s) to send its
 *   request head, or longer than REQUEST_TIMEOUT_MS (5 min) to send the whole request.
 *
 * Timeouts, and what each bounds (a slowloris client trickles its head to hold a socket):
 * - the head: `headerTimeoutMs` from its first byte (Node's headersTimeout). Node checks its
 *   timeouts on a timer (connectionsCheckingInterval, 30 s by default, which let a slow head hold a
 *   socket ~90 s): it runs every quarter of the head timeout here, at most every second, so a head
 *   is cut within 1.25x its timeout;
 * - the whole request, body included: REQUEST_TIMEOUT_MS (a large prompt on a slow link must fit);
 * - keep-alive: idle client connections are kept 65 s, longer than common load balancers' idle
 *   timeouts (60 s), so a balancer never sends a request into a connection the proxy is closing.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';

import { ClientError, statusLine } from './error-body.js';
import { NodeClientResponse, NodeRequestHead } from './node-shims.js';
import type { RouteHandler, RouteTable } from './route-table.js';

const KEEP_ALIVE_MS = 65_000;
const REQUEST_TIMEOUT_MS = 300_000;
/** The longest period of Node's timeout check (its default, 30 s, holds a slow head ~90 s). */
const MAX_CHECK_INTERVAL_MS = 1_000;

/** What the Node server needs besides the table: the 405 and 404 answers, and whether the proxy is closing. */
export interface NodeServerHooks {
  wrongMethod(allow: string): RouteHandler;
  fallback: RouteHandler;
  /** True while the proxy drains: every response then carries `connection: close`. */
  closing(): boolean;
}

/** Dispatches one Node request through the table (used by the server and by handleNode). */
export function dispatchNode(
  table: RouteTable,
  hooks: NodeServerHooks,
  req: IncomingMessage,
  res: ServerResponse,
  next?: (error?: unknown) => void,
): void {
  const head = new NodeRequestHead(req);
  const found = table.lookup(req.method ?? 'GET', head.getUrl());
  if (found === undefined && next !== undefined) return next();
  if (hooks.closing()) res.shouldKeepAlive = false;
  const client = new NodeClientResponse(req, res);
  if (found === undefined) hooks.fallback(client, head);
  else if (typeof found === 'function') found(client, head);
  else hooks.wrongMethod(found.allow)(client, head);
}

export function createNodeServer(table: RouteTable, hooks: NodeServerHooks, headerTimeoutMs: number): Server {
  const options = {
    requireHostHeader: false,
    keepAliveTimeout: KEEP_ALIVE_MS,
    headersTimeout: headerTimeoutMs,
    // Node refuses a head timeout longer than the request's.
    requestTimeout: Math.max(REQUEST_TIMEOUT_MS, headerTimeoutMs),
    connectionsCheckingInterval: Math.min(MAX_CHECK_INTERVAL_MS, Math.max(1, Math.floor(headerTimeoutMs / 4))),
  };
  const server = createServer(options, (req, res) => {
    const refusal = protocolRefusal(req);
    if (refusal !== undefined) {
      const body = refusal.body();
      res.shouldKeepAlive = false;
      res
        .writeHead(refusal.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) })
        .end(body);
      return;
    }
    dispatchNode(table, hooks, req, res);
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => answerClientError(error, socket));
  return server;
}

/** A request Node parsed that the proxy still refuses, by its version or missing Host. */
function protocolRefusal(req: IncomingMessage): ClientError | undefined {
  if (req.httpVersionMajor !== 1)
    return new ClientError(505, `HTTP/${req.httpVersion} is not supported; use HTTP/1.1`, 'unsupported_protocol');
  if (req.httpVersionMinor >= 1 && req.headers.host === undefined)
    return new ClientError(400, 'an HTTP/1.1 request must carry a Host header', 'bad_request');
  return undefined;
}

/**
 * Answers what Node's parser rejected, on the raw socket (Node's own answer has no body).
 * A socket that can no longer be written (the client reset it) is destroyed.
 */
function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  const refusal = clientErrorRefusal(error.code);
  const body = refusal.body();
  socket.end(
    `HTTP/1.1 ${statusLine(refusal.status)}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

function clientErrorRefusal(code: string | undefined): ClientError {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return new ClientError(431, 'the request head is too large (too many or too long headers)', 'headers_too_large');
    case 'HPE_INVALID_VERSION':
      return new ClientError(505, 'this HTTP version is not supported; use HTTP/1.1', 'unsupported_protocol');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return new ClientError(408, 'the request was not received in time', 'request_timeout');
    default:
      return new ClientError(400, `the request is not valid HTTP/1.x (${code ?? 'unknown error'})`, 'bad_request');
  }
}
