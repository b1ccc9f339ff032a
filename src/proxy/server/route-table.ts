/**
 * The proxy's routes, declared once and served by either HTTP server: registered into a
 * uWebSockets.js app (`applyTo`), or looked up per request by the Node `http` server and the
 * embedding handler (`lookup`).
 *
 * A route is a method and a path: an exact path (`/v1/models`) or a prefix ending in `/*`
 * (`/v1/models/*`, which matches `/v1/models/<anything>` but not `/v1/models` itself). Exact
 * paths win over prefixes, the longest prefix over shorter ones, as uWS resolves them.
 *
 * Method rules, the same in both servers:
 * - a GET route answers HEAD too (the handler runs against a response whose body is dropped),
 *   unless registered with `{ head: false }` (an event stream has no end to report);
 * - a known path with another method gets 405 with `Allow`;
 * - anything else goes to the fallback (404).
 */
import type { ClientRequestHead, ClientResponse } from './client-io.js';
import type { RecognizedString, UwsApp, UwsResponse } from './uws.js';

export type RouteHandler = (res: ClientResponse, req: ClientRequestHead) => void;

export type RouteMethod = 'GET' | 'HEAD' | 'POST';

/** Wraps a uWS route handler (for a check every request passes first). */
export type UwsGuard = <Res extends ClientResponse>(
  handler: (res: Res, req: ClientRequestHead) => void,
) => (res: Res, req: ClientRequestHead) => void;

/** What a ProxyMount registers its routes on. */
export interface MountApp {
  get(path: string, handler: RouteHandler, options?: { head?: boolean }): void;
  post(path: string, handler: RouteHandler): void;
}

interface PathRoutes {
  path: string;
  /** Prefix routes keep the part before `/*`. */
  prefix: string | undefined;
  methods: Map<RouteMethod, RouteHandler>;
}

/** A uWS handler for the HEAD of a GET route: the body is never written (see HeadResponse). */
function headOf(handler: RouteHandler): (res: UwsResponse, req: ClientRequestHead) => void {
  return (res, req) => handler(new HeadResponse(res), req);
}

export class RouteTable implements MountApp {
  private readonly byPath = new Map<string, PathRoutes>();

  get(path: string, handler: RouteHandler, options: { head?: boolean } = {}): void {
    this.add('GET', path, handler);
    if (options.head !== false) this.add('HEAD', path, handler);
  }

  post(path: string, handler: RouteHandler): void {
    this.add('POST', path, handler);
  }

  /** The exact (non-prefix) paths, in registration order. */
  exactPaths(): string[] {
    return [...this.byPath.values()].filter((r) => r.prefix === undefined).map((r) => r.path);
  }

  /**
   * The handler for a request (`path` without the query), or the methods the path allows
   * (405), or undefined (an unknown path). HEAD gets the GET handler; the Node server drops
   * the body itself.
   */
  lookup(method: string, path: string): RouteHandler | { allow: string } | undefined {
    const routes = this.match(path);
    if (routes === undefined) return undefined;
    const handler = routes.methods.get(method as RouteMethod);
    if (handler !== undefined) return handler;
    return { allow: allowHeader(routes) };
  }

  /**
   * Registers every route into a uWS app, each known path's other methods as 405, and `fallback`
   * for everything else; each handler behind `guard` (the framing check, uws-framing.ts).
   */
  applyTo(
    app: UwsApp,
    wrongMethod: (allow: string) => RouteHandler,
    fallback: RouteHandler,
    guard: UwsGuard = (handler) => handler,
  ): void {
    for (const routes of this.byPath.values()) {
      for (const [method, handler] of routes.methods) {
        if (method === 'GET') app.get(routes.path, guard(handler));
        else if (method === 'POST') app.post(routes.path, guard(handler));
        else app.head(routes.path, guard(headOf(handler)));
      }
      app.any(routes.path, guard(wrongMethod(allowHeader(routes))));
    }
    app.any('/*', guard(fallback));
  }

  private add(method: RouteMethod, path: string, handler: RouteHandler): void {
    if (!path.startsWith('/')) throw new Error(`route paths start with /: ${path}`);
    let routes = this.byPath.get(path);
    if (routes === undefined) {
      const prefix = path.endsWith('/*') ? path.slice(0, -1) : undefined;
      routes = { path, prefix, methods: new Map() };
      this.byPath.set(path, routes);
    }
    if (routes.methods.has(method)) throw new Error(`${method} ${path} is registered twice`);
    routes.methods.set(method, handler);
  }

  private match(path: string): PathRoutes | undefined {
    const exact = this.byPath.get(path);
    if (exact !== undefined && exact.prefix === undefined) return exact;
    let best: PathRoutes | undefined;
    for (const routes of this.byPath.values()) {
      if (routes.prefix === undefined || !path.startsWith(routes.prefix) || path.length === routes.prefix.length)
        continue;
      if (best === undefined || routes.prefix.length > best.prefix!.length) best = routes;
    }
    return best;
  }
}

function allowHeader(routes: PathRoutes): string {
  return [...routes.methods.keys()].join(', ');
}

/**
 * A response to HEAD: status and headers pass through; body writes are dropped, and the
 * response ends (with no body) at the handler's end(), or at its first write() for a handler
 * that streams. After that, every call is a no-op, so a streaming handler never writes to an
 * ended response.
 */
class HeadResponse implements ClientResponse {
  private ended = false;

  constructor(private readonly res: UwsResponse) {}

  onAborted(handler: () => void): this {
    this.res.onAborted(handler);
    return this;
  }
  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): this {
    this.res.onData(handler);
    return this;
  }
  cork(callback: () => void): this {
    this.res.cork(callback);
    return this;
  }
  writeStatus(status: RecognizedString): this {
    if (!this.ended) this.res.writeStatus(status);
    return this;
  }
  writeHeader(key: RecognizedString, value: RecognizedString): this {
    if (!this.ended) this.res.writeHeader(key, value);
    return this;
  }
  write(): boolean {
    this.end();
    return true;
  }
  onWritable(handler: (offset: number) => boolean): this {
    this.res.onWritable(handler);
    return this;
  }
  end(): this {
    if (this.ended) return this;
    this.ended = true;
    // No reported length: endWithoutBody(n) aborts the process in this uWS build (20.30).
    this.res.endWithoutBody();
    return this;
  }
  close(): this {
    if (!this.ended) this.res.close();
    this.ended = true;
    return this;
  }
}
