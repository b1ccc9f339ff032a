/**
 * createProxy(): the OpenAI-compatible routing proxy on uWebSockets.js.
 *
 *   POST /v1/chat/completions, /v1/completions   routed, relayed (proxy-exchange.ts)
 *   GET  /v1/models                               merged from routable backends
 *   GET  /health                                  liveness: 200 while the process serves
 *   GET  /ready                                   200 with ≥ 1 routable backend, else 503
 *   a known path, another method                  405 with Allow
 *   anything else                                 404
 * Extra routes (metrics, admin, dashboard) come from `options.mounts`, called with the app and
 * the ProxyState before the catch-alls are registered; uWS prefers a static path and a specific
 * method over `any` and wildcards whatever the order, so a mount can take `GET /` or `/metrics`.
 *
 * Every response is an OpenAI-style JSON error or the engine's own bytes; a throw inside a
 * handler becomes a 500, never a crash. close(): stops listening, runs the mounts' cleanups,
 * then lets in-flight requests finish for `graceMs` (default 10 s) before their upstream connections are cut, and closes
 * every pool; nothing of the proxy's keeps the event loop alive afterwards.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';

import uWS from 'uWebSockets.js';

import type { Router } from '../core/router.js';
import { RETRY_AFTER, sendClientError, sendJson } from './client-response.js';
import type { ClientRequestHead, ClientResponse } from './client-io.js';
import { ClientError } from './error-body.js';
import { NodeClientResponse, NodeRequestHead } from './node-shims.js';
import { handleModels } from './models-route.js';
import { ProxyExchange, type ExchangeContext } from './proxy-exchange.js';
import { ObserverList } from './proxy-observer.js';
import { resolveProxyOptions, type ProxyOptions, type ResolvedProxyOptions } from './proxy-options.js';
import { ProxyState } from './proxy-state.js';

export interface Proxy {
  /** Starts listening; port 0 picks a free one. Resolves with the bound port. */
  listen(port: number, host?: string): Promise<{ port: number }>;
  /** Stops listening, finishes or cuts in-flight requests, closes the upstream pools. */
  close(options?: { graceMs?: number }): Promise<void>;
  readonly router: Router;
  readonly state: ProxyState;
  readonly app: uWS.TemplatedApp;
  readonly options: ResolvedProxyOptions;
  /**
   * The proxy's OpenAI routes for a Node `http` server, Express or Connect (`app.use(proxy.handleNode)`):
   * the same routing, relaying, retries and errors as the uWS server. A path that is not one of
   * them goes to `next` when given (middleware), else gets the 404. Mounts (metrics, admin,
   * dashboard) are served only by the uWS server.
   */
  readonly handleNode: NodeHandler;
  /** The paths handleNode serves (the OpenAI routes, /health, /ready). */
  readonly paths: readonly string[];
}

/** `(req, res, next?)`: a Node http request listener that is also Connect/Express middleware. */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

type Handler = (res: ClientResponse, req: ClientRequestHead) => void;

/** Runs a handler so that a throw becomes a 500 (when the response is still writable). */
function guarded(handler: Handler, warn: (m: string) => void): Handler {
  return (res, req) => {
    try {
      handler(res, req);
    } catch (error) {
      warn(`kvroute proxy: internal error: ${(error as Error)?.stack ?? String(error)}`);
      try {
        sendClientError(res, new ClientError(500, 'internal error in the proxy', 'upstream_error'));
      } catch {
        // already answered or aborted
      }
    }
  };
}

export function createProxy(options: ProxyOptions): Proxy {
  const resolved = resolveProxyOptions(options);
  const observers = new ObserverList(resolved.observers, resolved.onWarning);
  const state = new ProxyState(
    resolved.backends,
    {
      policy: resolved.policy,
      blockSize: resolved.blockSize,
      engineState: resolved.engineState,
      onWarning: resolved.onWarning,
    },
    resolved,
    observers,
    resolved.onWarning,
    resolved,
  );
  const ctx: ExchangeContext = { state, observers, options: resolved };
  const app = uWS.App();
  const warn = resolved.onWarning;

  const cleanups: (() => void)[] = [];
  for (const mount of resolved.mounts) {
    const cleanup = mount(app, state);
    if (cleanup !== undefined) cleanups.push(cleanup);
  }

  // One table serves the uWS app and the Node handler alike.
  const routes: Record<string, { method: 'GET' | 'POST'; handle: Handler }> = {
    '/v1/chat/completions': { method: 'POST', handle: (res, req) => new ProxyExchange(res, req, 'chat', ctx) },
    '/v1/completions': { method: 'POST', handle: (res, req) => new ProxyExchange(res, req, 'completions', ctx) },
    '/v1/models': { method: 'GET', handle: (res, req) => handleModels(res, req, state) },
    '/health': { method: 'GET', handle: (res) => sendJson(res, 200, '{"status":"ok"}') },
    '/ready': {
      method: 'GET',
      handle: (res) => {
        const routable = state.routableCount();
        const body = JSON.stringify({ ready: routable > 0, routable_backends: routable });
        sendJson(res, routable > 0 ? 200 : 503, body, routable > 0 ? undefined : RETRY_AFTER);
      },
    },
  };
  const wrongMethod =
    (path: string, method: string): Handler =>
    (res, req) => {
      const got = req.getCaseSensitiveMethod();
      const error = new ClientError(405, `${got} ${path} is not allowed; use ${method}`, 'method_not_allowed');
      sendJson(res, 405, error.body(), ['allow', method]);
    };
  const notFound: Handler = (res, req) => {
    const error = new ClientError(404, `Invalid URL (${req.getCaseSensitiveMethod()} ${req.getUrl()})`, 'not_found');
    sendJson(res, 404, error.body());
  };
  for (const [path, route] of Object.entries(routes)) {
    const handle = guarded(route.handle, warn);
    if (route.method === 'POST') app.post(path, handle);
    else app.get(path, handle);
    app.any(path, wrongMethod(path, route.method));
  }
  app.any('/*', notFound);

  const handleNode: NodeHandler = (req, res, next) => {
    const head = new NodeRequestHead(req);
    const path = head.getUrl();
    const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
    if (route === undefined && next !== undefined) return next();
    const client = new NodeClientResponse(req, res);
    if (route === undefined) notFound(client, head);
    else if (req.method !== route.method) wrongMethod(path, route.method)(client, head);
    else guarded(route.handle, warn)(client, head);
  };

  let listenSocket: uWS.us_listen_socket | undefined;
  let closed: Promise<void> | undefined;
  return {
    router: state.router,
    state,
    app,
    options: resolved,
    handleNode,
    paths: Object.keys(routes),
    listen(port, host = '127.0.0.1') {
      return new Promise((resolve, reject) => {
        if (listenSocket !== undefined) return reject(new Error('the proxy is already listening'));
        app.listen(host, port, (socket) => {
          if (socket === false) {
            reject(Object.assign(new Error(`cannot listen on ${host}:${port}`), { code: 'EADDRINUSE' }));
            return;
          }
          listenSocket = socket;
          resolve({ port: uWS.us_socket_local_port(socket) });
        });
      });
    },
    close({ graceMs = 10_000 } = {}) {
      closed ??= (async () => {
        if (listenSocket !== undefined) uWS.us_listen_socket_close(listenSocket);
        listenSocket = undefined;
        for (const cleanup of cleanups) cleanup();
        await state.close(graceMs);
      })();
      return closed;
    },
  };
}
