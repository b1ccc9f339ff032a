/**
 * Plumbing for the proxy tests: a proxy in front of simulated engines, hand-written node:http
 * stub upstreams that misbehave on purpose, an observer that records every lifecycle event,
 * and bounded waits on events (never sleeps).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

import OpenAI from 'openai';

import { createProxy, type Proxy } from '../../src/proxy/server/proxy-server.js';
import type { ProxyOptions } from '../../src/proxy/proxy-options.js';
import type { ProxyObserver, RequestRecord } from '../../src/proxy/observe/proxy-observer.js';
import { startSimFleet, type SimFleet } from '../../src/sim/sim-fleet.js';

export const MODEL = 'qwen3-coder-30b-a3b';

/** Every observer callback, in order, as [name, ...args]. */
export class RecordingObserver implements ProxyObserver {
  readonly events: Array<[string, ...unknown[]]> = [];
  private waiters: Array<() => void> = [];

  private push(event: [string, ...unknown[]]): void {
    this.events.push(event);
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  onRouted(instance: string, reason: string, policy: string, decisionMicros: number): void {
    this.push(['routed', instance, reason, policy, decisionMicros]);
  }
  onFirstByte(instance: string, ttftMs: number): void {
    this.push(['firstByte', instance, ttftMs]);
  }
  onFinished(
    instance: string | undefined,
    status: number,
    e2eMs: number,
    usage: unknown,
    outcome: string,
    model: string,
  ): void {
    this.push(['finished', instance, status, e2eMs, usage, outcome, model]);
  }
  onRequest(record: RequestRecord): void {
    this.push(['request', record]);
  }

  /** The RequestRecords so far. */
  records(): RequestRecord[] {
    return this.named('request').map((e) => e[1] as RequestRecord);
  }
  onUpstreamError(instance: string, kind: string, afterFirstByte: boolean): void {
    this.push(['upstreamError', instance, kind, afterFirstByte]);
  }
  onRetry(instance: string): void {
    this.push(['retry', instance]);
  }
  onBackendHealth(instance: string, healthy: boolean): void {
    this.push(['health', instance, healthy]);
  }
  onOffload(prefillInstance: string, instance: string, policy: string, prefillMs: number, fallback?: string): void {
    this.push(['offload', prefillInstance, instance, policy, prefillMs, fallback]);
  }
  onOffloadTransfer(instance: string, policy: string, ms: number): void {
    this.push(['offloadTransfer', instance, policy, ms]);
  }

  named(name: string): Array<[string, ...unknown[]]> {
    return this.events.filter((e) => e[0] === name);
  }

  /** Resolves when `predicate` holds after some event; rejects after `timeoutMs`. */
  async until(predicate: () => boolean, timeoutMs = 5_000, what = 'an observer event'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!predicate()) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(this.events.slice(-10))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

export interface ProxyRig {
  proxy: Proxy;
  base: string;
  client: OpenAI;
  observer: RecordingObserver;
  close(): Promise<void>;
}

/** A proxy on a free loopback port in front of `backends`, with a recording observer. */
export async function startProxy(options: Partial<ProxyOptions> & Pick<ProxyOptions, 'backends'>): Promise<ProxyRig> {
  const observer = new RecordingObserver();
  const warnings: string[] = [];
  const proxy = createProxy({
    onWarning: (m) => warnings.push(m),
    ...options,
    observers: [observer, ...(options.observers ?? [])],
  });
  const { port } = await proxy.listen(0, '127.0.0.1');
  const base = `http://127.0.0.1:${port}`;
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 20_000 });
  return { proxy, base, client, observer, close: () => proxy.close({ graceMs: 1_000 }) };
}

/** Simulated engines plus a proxy in front of them. */
export async function startFleetProxy(
  instances: number,
  options: Partial<ProxyOptions> = {},
  speed = 50,
): Promise<ProxyRig & { fleet: SimFleet }> {
  const fleet = await startSimFleet({ instances, port: 0, speed });
  const rig = await startProxy({ ...options, backends: fleet.urls });
  return {
    ...rig,
    fleet,
    close: async () => {
      await rig.close();
      await fleet.close();
    },
  };
}

export interface StubUpstream {
  url: string;
  server: Server;
  /** Requests seen, with their headers and bodies. */
  requests: Array<{ url: string; headers: IncomingMessage['headers']; body: Buffer }>;
  close(): Promise<void>;
}

/**
 * A node:http upstream whose handler the test writes; it gets the whole request body. Like a
 * real engine it answers the proxy's health probes (`GET /health`) and model discovery (`GET
 * /v1/models`, serving MODEL) by itself, unrecorded, unless `control` is false: then those reach
 * the handler too.
 */
export async function startStub(
  handler: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void,
  port = 0,
  { control = true, models = [MODEL] }: { control?: boolean; models?: string[] } = {},
): Promise<StubUpstream> {
  const requests: StubUpstream['requests'] = [];
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    if (control && req.method === 'GET' && req.url === '/health') return void res.writeHead(200).end();
    if (control && req.method === 'GET' && req.url === '/v1/models') {
      const data = models.map((id) => ({ id, object: 'model', owned_by: 'stub' }));
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ object: 'list', data }));
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      requests.push({ url: req.url ?? '', headers: req.headers, body });
      handler(req, res, body);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    server,
    requests,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A loopback URL where nothing listens (connections are refused). */
export async function refusingUrl(): Promise<string> {
  return (await refusingUrls(1))[0]!;
}

/**
 * `count` distinct loopback URLs where nothing listens. Their ports are held open together while
 * they are picked: picked one after another, the kernel may hand the same freed port out twice.
 */
export async function refusingUrls(count: number): Promise<string[]> {
  const servers = await Promise.all(
    Array.from({ length: count }, async () => {
      const server = createServer();
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      return server;
    }),
  );
  const urls = servers.map((s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`);
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  return urls;
}

/** POSTs JSON (or raw bytes) to the proxy with fetch. */
export function post(
  base: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  signal?: AbortSignal,
) {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' || body instanceof Uint8Array ? body : JSON.stringify(body),
    signal,
  });
}

/**
 * Proxies and stubs that close after each test: call `closeAll()` in afterEach. `defaults` are
 * merged under every proxy's options (a suite that runs once per upstream client sets it).
 */
export function scopedRigs(defaults: () => Partial<ProxyOptions> = () => ({})) {
  const cleanups: Array<() => Promise<void>> = [];
  return {
    async proxyFor(options: Parameters<typeof startProxy>[0]): Promise<ProxyRig> {
      const rig = await startProxy({ ...defaults(), ...options });
      cleanups.push(rig.close);
      return rig;
    },
    async stub(...args: Parameters<typeof startStub>): Promise<StubUpstream> {
      const s = await startStub(...args);
      cleanups.push(s.close);
      return s;
    },
    /** Runs `close` with the rest, in reverse order of registration. */
    add(close: () => Promise<void>): void {
      cleanups.push(close);
    },
    async closeAll(): Promise<void> {
      for (const c of cleanups.splice(0).reverse()) await c();
    },
  };
}

/** Resolves with `emitter`'s event, or rejects after `timeoutMs`. */
export function eventWithin<T = unknown>(
  emitter: { once(event: string, fn: (...args: never[]) => void): unknown },
  event: string,
  timeoutMs: number,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ${event} within ${timeoutMs} ms`)), timeoutMs);
    emitter.once(event, ((value: T) => {
      clearTimeout(timer);
      resolve(value);
    }) as (...args: never[]) => void);
  });
}
