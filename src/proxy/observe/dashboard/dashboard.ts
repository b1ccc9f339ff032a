/**
 * The live dashboard: `createDashboard()` gives the proxy an observer (what happened to each
 * request), a mount (GET / and /dashboard/*) and a close(). The page gets one JSON frame a
 * second over server-sent events (dashboard-frame.ts has the format and every number's source).
 *
 * Routes: GET / (the page), /dashboard/app.js, /dashboard/locale.js, /dashboard/app.css, /dashboard/uplot-<v>.min.*
 * (static, in memory since start), /dashboard/frame (one frame as JSON), /dashboard/events (SSE).
 *
 * The sampler: a 1 s interval that builds one frame, serialises it once and writes it to every
 * subscriber. It runs only while a page is connected (it starts on the first subscriber and
 * stops after the last), is unref'd so it never keeps the process alive, and stops for good on
 * close(). Observing costs the proxy O(1) per request whether or not anyone watches.
 *
 * Every handler answers before it returns, or hands the response to the SSE hub, which
 * registers onAborted first; none can throw (a frame that fails to build is warned about once
 * and reads as none), since a throw inside a uWS handler would take the proxy down.
 *
 * The mount returns close() as its cleanup, so `proxy.close()` ends open pages' SSE connections
 * and stops the sampler; close() may also be called directly and is idempotent.
 */

import type { ReconcileResult } from '../../../state/shadow-reconciler.js';
import type { ProxyMount } from '../../proxy-options.js';
import { DashboardObserver, type DashboardObserverOptions } from './dashboard-observer.js';
import { buildFrame, type DashboardFrame, type DashboardSource } from './dashboard-frame.js';
import { SseHub } from './sse-hub.js';
import { loadStaticAssets } from './static-assets.js';

export interface DashboardOptions extends DashboardObserverOptions {
  /** Milliseconds between frames (default 1,000). */
  intervalMs?: number;
  /** Hears a failure to build a frame, once (default: process.emitWarning). */
  onWarning?: (message: string) => void;
}

export interface Dashboard {
  /** Pass in `createProxy({ observers })`. */
  readonly observer: DashboardObserver;
  /** Pass in `createProxy({ mounts })`; mount it on one proxy only. */
  readonly mount: ProxyMount;
  /** Open event streams (pages watching). */
  readonly subscribers: number;
  /** The current frame (undefined before the mount ran). */
  frame(): DashboardFrame | undefined;
  /** Takes a ShadowReconciler round: each engine's own prefix-cache hit ratio, for the page. */
  onReconcile(results: readonly ReconcileResult[]): void;
  /** Stops the sampler and ends every open event stream. Idempotent. */
  close(): void;
}

const SECURITY_HEADERS: ReadonlyArray<[string, string]> = [
  ['x-content-type-options', 'nosniff'],
  ['content-security-policy', "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'"],
];

export function createDashboard(options: DashboardOptions = {}): Dashboard {
  return new LiveDashboard(options);
}

class LiveDashboard implements Dashboard {
  readonly observer: DashboardObserver;
  private readonly intervalMs: number;
  private readonly warn: (message: string) => void;
  private readonly assets = loadStaticAssets();
  private readonly hub = new SseHub((count) => this.subscribersChanged(count));
  private source: DashboardSource | undefined;
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  private warned = false;
  private last: { t: number; json: string } | undefined;

  constructor(options: DashboardOptions) {
    const intervalMs = options.intervalMs ?? 1000;
    if (!Number.isSafeInteger(intervalMs) || intervalMs < 10)
      throw new RangeError(`dashboard intervalMs must be an integer ≥ 10, got ${intervalMs}`);
    this.intervalMs = intervalMs;
    this.observer = new DashboardObserver(options);
    this.warn = options.onWarning ?? ((m) => process.emitWarning(m, { code: 'KVROUTE_DASHBOARD' }));
  }

  get subscribers(): number {
    return this.hub.size;
  }

  frame(): DashboardFrame | undefined {
    return this.source === undefined ? undefined : buildFrame(this.observer, this.source);
  }

  readonly mount: ProxyMount = (app, state) => {
    if (this.source !== undefined) throw new Error('kvroute dashboard: this dashboard is already mounted on a proxy');
    this.source = state;
    for (const asset of this.assets.values()) {
      app.get(asset.path, (res) => {
        res.writeStatus('200 OK').writeHeader('content-type', asset.contentType);
        res.writeHeader('cache-control', asset.cacheControl);
        for (const [k, v] of SECURITY_HEADERS) res.writeHeader(k, v);
        res.end(asset.body);
      });
    }
    app.get('/dashboard/frame', (res) => {
      res.writeStatus('200 OK').writeHeader('content-type', 'application/json');
      res.writeHeader('cache-control', 'no-store').end(this.frameJson() ?? '{}');
    });
    app.get(
      '/dashboard/events',
      (res) => {
        if (this.closed) res.writeStatus('503 Service Unavailable').end('the dashboard is closed\n');
        else this.hub.subscribe(res, this.frameJson());
      },
      { head: false }, // an event stream has no end for a HEAD to report
    );
    return () => this.close();
  };

  onReconcile(results: readonly ReconcileResult[]): void {
    for (const r of results)
      if (r.prefixCacheHitRatio !== undefined) this.observer.setEngineHitRatio(r.instance, r.prefixCacheHitRatio);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.hub.close(); // its count change clears the timer
  }

  /**
   * A frame's JSON, reused while younger than one interval (page reloads, /dashboard/frame).
   * Never throws: it runs in uWS handlers and in the timer, where a throw would take the proxy
   * down; a failure is reported once and reads as "no frame".
   */
  private frameJson(): string | undefined {
    const now = this.observer.now();
    if (this.last !== undefined && now - this.last.t < this.intervalMs) return this.last.json;
    try {
      const f = this.frame();
      if (f === undefined) return undefined;
      this.last = { t: now, json: JSON.stringify(f) };
      return this.last.json;
    } catch (error) {
      if (!this.warned)
        this.warn(`kvroute dashboard: building a frame failed (further failures are not reported): ${String(error)}`);
      this.warned = true;
      return undefined;
    }
  }

  private readonly tick = (): void => {
    this.last = undefined;
    const json = this.frameJson();
    if (json !== undefined) this.hub.broadcast(json);
  };

  /** The sampler runs while someone listens, never after close(). */
  private subscribersChanged(count: number): void {
    if (count > 0 && this.timer === undefined && !this.closed) {
      this.timer = setInterval(this.tick, this.intervalMs);
      this.timer.unref();
    } else if (count === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }
}
