/**
 * createProxy(): the OpenAI-compatible routing proxy, on uWebSockets.js (default) or Node's
 * http module (`http: 'node'`, node-server.ts); both serve one RouteTable.
 *
 *   POST /v1/chat/completions, /v1/completions   routed, relayed (exchange/proxy-exchange.ts)
 *   POST /v1/messages (Anthropic), /v1/responses  the same, their prompts keyed as chat (docs/api-formats.md)
 *   GET  /v1/models, /v1/models/{id}             from the backends' discovered models
 *   GET  /health                                  liveness: 200 while the process serves
 *   GET  /ready                                   200 once started, not closing, ≥ 1 routable backend; else 503
 *   GET routes answer HEAD too; a known path with another method gets 405 with Allow; else 404.
 * Extra routes (metrics, admin, dashboard) come from `options.mounts`, called with the route
 * table and the ProxyState before the catch-alls; exact paths and specific methods win over
 * prefixes and catch-alls whatever the order, so a mount can take `GET /` or `/metrics`.
 *
 * Every response is an OpenAI-style JSON error or the engine's own bytes; a throw inside a
 * handler becomes a 500, never a crash.
 *
 * Lifecycle: createProxy() starts the backends' first health checks at once; listen() waits for
 * them (bounded by the probe timeouts), then binds the port exclusively (a second proxy on the
 * same port fails with EADDRINUSE instead of sharing it). close(): /ready turns 503 at once, the
 * port stops accepting, requests on open connections are still served (with `connection:
 * close`) until every open request has finished or `graceMs` (default 10 s) ran out, then the
 * pools close; nothing of the proxy's keeps the event loop alive afterwards.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { createServer as createNetServer, Server as NetServer } from 'node:net';

import type { Router } from '../../core/router.js';
import { RETRY_AFTER, sendClientError, sendJson } from './client-response.js';
import { ClientError, echo } from './error-body.js';
import { handleModel, handleModels } from './models-route.js';
import { createNodeServer, dispatchNode, type NodeServerHooks } from './node-server.js';
import { ProxyExchange, type ExchangeContext } from '../exchange/proxy-exchange.js';
import { ObserverList } from '../observe/proxy-observer.js';
import { discoverBackends } from '../upstream/discovered-backends.js';
import { resolveProxyOptions, type ProxyOptions, type ResolvedProxyOptions } from '../proxy-options.js';
import { ProxyState, type ThreadRole } from '../proxy-state.js';
import { RouteTable, type RouteHandler } from './route-table.js';
import { framingGuard } from './uws-framing.js';
import { closeListenSocket, createUwsApp, listenSocketPort, listenUws, type ListenSocket, type UwsApp } from './uws.js';
import { ControlRelay } from '../threads/control-relay.js';

export interface Proxy {
  /**
   * Waits for the backends' first health checks, then listens (exclusively: a port in use is an
   * EADDRINUSE error); port 0 picks a free one. Resolves with the bound port.
   */
  listen(port: number, host?: string, options?: ListenOptions): Promise<{ port: number }>;
  /**
   * uWS mode: also listens on 127.0.0.1 at a free port, for the other threads of `kvroute serve
   * --threads N` to relay the requests that are not theirs to serve (threads/control-relay.ts).
   */
  listenControl(): Promise<{ port: number }>;
  /** Resolves once every configured backend has had its first health check (listen() waits for it). */
  started(): Promise<void>;
  /** Stops listening, finishes or cuts in-flight requests, closes the upstream pools. */
  close(options?: { graceMs?: number }): Promise<void>;
  readonly router: Router;
  readonly state: ProxyState;
  /** The uWebSockets.js app in `http: 'uws'` mode; undefined in `http: 'node'` mode. */
  readonly app: UwsApp | undefined;
  readonly options: ResolvedProxyOptions;
  /**
   * The proxy's routes for a Node `http` server, Express or Connect (`app.use(proxy.handleNode)`):
   * the same routing, relaying, retries and errors as the proxy's own server, mounts included. A
   * path that is not one of them goes to `next` when given (middleware), else gets the 404.
   */
  readonly handleNode: NodeHandler;
  /** The exact paths the proxy serves (its own routes and the mounts'). */
  readonly paths: readonly string[];
  /** Whether a path (without its query) is one of the proxy's routes, prefixes (`/v1/models/{id}`) included. */
  owns(path: string): boolean;
}

export interface ListenOptions {
  /**
   * Share the port with the other threads of this process (SO_REUSEPORT; `kvroute serve
   * --threads N`): the kernel spreads connections over them. Default false: the port is exclusive.
   */
  reusePort?: boolean;
}

/** Not public: how `kvroute serve --threads N` makes a thread's proxy (threads/proxy-thread.ts). */
export interface InternalProxyOptions {
  /** A thread of the process: routes with the main thread's core, relays other paths to it. */
  thread?: ThreadRole & { controlOrigin: string };
}

/** `(req, res, next?)`: a Node http request listener that is also Connect/Express middleware. */
export type NodeHandler = (req: IncomingMessage, res: ServerResponse, next?: (error?: unknown) => void) => void;

/** Runs a handler so that a throw becomes a 500 (when the response is still writable). */
function guarded(handler: RouteHandler, warn: (m: string) => void): RouteHandler {
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

/** The proxy's own routes (mounts add theirs to the same table). */
function proxyRoutes(table: RouteTable, ctx: ExchangeContext, warn: (m: string) => void): void {
  const { state } = ctx;
  const g = (handler: RouteHandler) => guarded(handler, warn);
  table.post(
    '/v1/chat/completions',
    g((res, req) => new ProxyExchange(res, req, 'chat', ctx)),
  );
  table.post(
    '/v1/completions',
    g((res, req) => new ProxyExchange(res, req, 'completions', ctx)),
  );
  table.post(
    '/v1/messages',
    g((res, req) => new ProxyExchange(res, req, 'messages', ctx)),
  );
  table.post(
    '/v1/responses',
    g((res, req) => new ProxyExchange(res, req, 'responses', ctx)),
  );
  table.get(
    '/v1/models',
    g((res, req) => handleModels(res, req, state)),
  );
  table.get(
    '/v1/models/*',
    g((res, req) => handleModel(res, req, state)),
  );
  table.get('/health', (res) => sendJson(res, 200, '{"status":"ok"}', undefined, state.closing));
  table.get('/ready', (res) => {
    const ready = state.ready();
    const body = JSON.stringify({
      ready,
      routable_backends: state.routableCount(),
      ...(state.closing ? { closing: true } : {}),
      ...(state.started ? {} : { starting: true }),
      models: state.routableByModel(),
      ...state.readyDetail?.(),
    });
    sendJson(res, ready ? 200 : 503, body, ready ? undefined : RETRY_AFTER, state.closing);
  });
}

/** Why a listen failed, in the errno a Node server would have given (uWS only says "false"). */
function listenError(host: string, port: number): Promise<NodeJS.ErrnoException> {
  return new Promise((resolve) => {
    const probe = createNetServer();
    probe.once('error', (error: NodeJS.ErrnoException) => resolve(error));
    probe.listen({ host, port, exclusive: true }, () =>
      probe.close(() => resolve(Object.assign(new Error('listen failed'), { code: 'EUNKNOWN' }))),
    );
  });
}

/** A failed listen's error, in words (the `code` kept): what `kvroute serve` prints and exits 2 with. */
export function describeListenError(error: NodeJS.ErrnoException, host: string, port: number): Error {
  const where = `${host}:${port}`;
  const message =
    error.code === 'EADDRINUSE'
      ? `address in use: ${where} is taken by another process (another kvroute serve?)`
      : error.code === 'EACCES'
        ? `permission denied to listen on ${where}`
        : error.code === 'EADDRNOTAVAIL'
          ? `${host} is not an address of this machine`
          : `cannot listen on ${where} (${error.code ?? error.message})`;
  return Object.assign(new Error(message), { code: error.code ?? 'EUNKNOWN' });
}

export function createProxy(options: ProxyOptions, internal: InternalProxyOptions = {}): Proxy {
  const resolved = resolveProxyOptions(options);
  const observers = new ObserverList(resolved.observers, resolved.onWarning);
  const state = new ProxyState(
    resolved.backends,
    {
      policy: resolved.policy,
      costs: resolved.costs,
      costPriorScale: resolved.costPriorScale,
      sessionReturns: resolved.sessionReturns,
      blockSize: resolved.blockSize,
      engineState: resolved.engineState,
      onWarning: resolved.onWarning,
      tokenizers: resolved.tokenizers,
      thread: internal.thread,
      discoveredEventFed: resolved.discovery?.kvEvents !== undefined,
    },
    resolved,
    observers,
    resolved.onWarning,
  );
  const ctx: ExchangeContext = { state, observers, options: resolved, tracing: undefined };
  // The main thread owns the backend set; threads take it from the main thread's state.
  const discovered =
    resolved.discovery === undefined || internal.thread !== undefined
      ? undefined
      : discoverBackends(state, resolved.discovery, resolved.onWarning);
  // The OpenTelemetry SDK is loaded only by a proxy that traces; requests before it loaded (an
  // embedder's, ahead of started()) go untraced.
  const tracingReady =
    resolved.tracing === undefined
      ? Promise.resolve()
      : import('../observe/tracing.js').then(({ Tracing }) => {
          ctx.tracing = new Tracing(resolved.tracing!, resolved.onWarning);
        });
  const warn = resolved.onWarning;

  const table = new RouteTable();
  const cleanups: (() => void)[] = [];
  for (const mount of resolved.mounts) {
    const cleanup = mount(table, state);
    if (cleanup !== undefined) cleanups.push(cleanup);
  }
  proxyRoutes(table, ctx, warn);

  // A thread serves the data path itself and hands everything else to the main thread.
  const relay = internal.thread === undefined ? undefined : new ControlRelay(internal.thread.controlOrigin);
  if (relay !== undefined) cleanups.push(() => void relay.close());
  const hooks: NodeServerHooks = {
    wrongMethod: (allow) => (res, req) => {
      if (relay !== undefined) return relay.handle(res, req);
      const got = req.getCaseSensitiveMethod();
      const error = new ClientError(
        405,
        `${echo(got)} ${echo(req.getUrl())} is not allowed; use ${allow}`,
        'method_not_allowed',
      );
      sendJson(res, 405, error.body(), ['allow', allow]);
    },
    fallback: (res, req) => {
      if (relay !== undefined) return relay.handle(res, req);
      const error = new ClientError(
        404,
        `Invalid URL (${echo(req.getCaseSensitiveMethod())} ${echo(req.getUrl())})`,
        'not_found',
      );
      sendJson(res, 404, error.body());
    },
    closing: () => state.closing,
  };

  const app = resolved.http === 'uws' ? createUwsApp() : undefined;
  if (app !== undefined) table.applyTo(app, hooks.wrongMethod, hooks.fallback, framingGuard);
  const handleNode: NodeHandler = (req, res, next) => dispatchNode(table, hooks, req, res, next);

  let listenSocket: ListenSocket | undefined;
  let controlSocket: ListenSocket | undefined;
  let nodeServer: Server | undefined;
  let closed: Promise<void> | undefined;

  const listenApp = (uwsApp: UwsApp, port: number, host: string, exclusive = true) =>
    new Promise<{ port: number }>((resolve, reject) => {
      listenUws(uwsApp, host, port, exclusive, (socket) => {
        if (socket === false) {
          void listenError(host, port).then((error) => reject(describeListenError(error, host, port)));
          return;
        }
        listenSocket = socket;
        resolve({ port: listenSocketPort(socket) });
      });
    });

  const listenNode = (port: number, host: string) =>
    new Promise<{ port: number }>((resolve, reject) => {
      const server = createNodeServer(table, hooks, resolved.headerTimeoutMs);
      server.once('error', (error: NodeJS.ErrnoException) => reject(describeListenError(error, host, port)));
      server.listen({ host, port, exclusive: true }, () => {
        nodeServer = server;
        const address = server.address();
        resolve({ port: typeof address === 'object' && address !== null ? address.port : port });
      });
    });

  return {
    router: state.router,
    state,
    app,
    options: resolved,
    handleNode,
    paths: table.exactPaths(),
    owns: (path) => table.lookup('GET', path) !== undefined,
    started: async () => {
      await Promise.all([state.start(), tracingReady, discovered?.ready]);
    },
    async listen(port, host = '127.0.0.1', { reusePort = false } = {}) {
      if (listenSocket !== undefined || nodeServer !== undefined) throw new Error('the proxy is already listening');
      if (reusePort && app === undefined) throw new Error('reusePort needs the uWebSockets.js server (http: uws)');
      await Promise.all([state.start(), tracingReady, discovered?.ready]);
      return app !== undefined ? listenApp(app, port, host, !reusePort) : listenNode(port, host);
    },
    async listenControl() {
      if (app === undefined) throw new Error('a control listener needs the uWebSockets.js server (http: uws)');
      if (controlSocket !== undefined) throw new Error('the control listener is already open');
      const main = listenSocket;
      const bound = await listenApp(app, 0, '127.0.0.1');
      // listenApp records the socket it opened as the main one: keep them apart.
      controlSocket = listenSocket;
      listenSocket = main;
      return bound;
    },
    close({ graceMs = 10_000 } = {}) {
      closed ??= (async () => {
        state.closing = true;
        if (listenSocket !== undefined) closeListenSocket(listenSocket);
        listenSocket = undefined;
        // The control listener stays open through the grace period: other threads still relay
        // their scrapes and admin calls; it closes with the pools.
        const server = nodeServer;
        // net.Server's close() only stops accepting; http.Server's would also drop the idle
        // keep-alive connections, on which a balancer may be sending its next request right now.
        // Those stay open through the grace period and are served with `connection: close`.
        const serverClosed =
          server === undefined
            ? undefined
            : new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
        for (const cleanup of cleanups) cleanup();
        discovered?.close();
        await state.close(graceMs);
        // After the last request ended: its spans are in the batch the close exports.
        await tracingReady.catch(() => {});
        await ctx.tracing
          ?.close()
          .catch((error: unknown) => warn(`kvroute proxy: exporting traces failed: ${String(error)}`));
        if (controlSocket !== undefined) closeListenSocket(controlSocket);
        controlSocket = undefined;
        server?.closeAllConnections();
        await serverClosed;
      })();
      return closed;
    },
  };
}
