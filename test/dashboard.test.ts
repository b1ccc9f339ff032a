/**
 * The live dashboard (src/proxy/observe/dashboard/): its rolling windows and observer against a manual
 * clock, the SSE hub's uWS discipline against a fake response (backpressure, abort, close), and
 * the page itself in a real browser: headless Chromium (test/helpers/browser.ts: Debian's when
 * installed, else the npm-shipped one) opens the page of a proxy in front of two simulated
 * engines and sees the request counter move after requests go through the proxy, and the tenants
 * panel show two tenants' rows with their admitted and rate-limited counts and what a limited
 * tenant's bucket holds; and the page still draws under a locale tag Intl rejects (`en-US@posix`).
 *
 * Set KVROUTE_DASHBOARD_SCREENSHOT=path.png to save the page as the test leaves it.
 */
import type { Browser } from 'playwright-core';
import { describe, expect, it, vi } from 'vitest';

import { createDashboard } from '../src/proxy/observe/dashboard/dashboard.js';
import type { DashboardFrame } from '../src/proxy/observe/dashboard/dashboard-frame.js';
import { DashboardObserver } from '../src/proxy/observe/dashboard/dashboard-observer.js';
import { LOCALE_GUARD_SCRIPT } from '../src/proxy/observe/dashboard/locale-guard.js';
import { PAGE_SCRIPT } from '../src/proxy/observe/dashboard/page-script.js';
import { binOf, binValue, QuantileWindow, RateWindow } from '../src/proxy/observe/dashboard/sliding-window.js';
import { MAX_SKIPPED, SseHub } from '../src/proxy/observe/dashboard/sse-hub.js';
import { createProxy, type Proxy } from '../src/proxy/server/proxy-server.js';
import type { ProxyState } from '../src/proxy/proxy-state.js';
import type { ClientRequestHead, ClientResponse } from '../src/proxy/server/client-io.js';
import type { MountApp, RouteHandler } from '../src/proxy/server/route-table.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { ShadowReconciler } from '../src/state/shadow-reconciler.js';
import { launchBrowser, newPage } from './helpers/browser.js';

/** The page's DOM, as much as the functions run in the browser below use (tsconfig has no DOM lib). */
interface PageElement {
  getAttribute(name: string): string | null;
  readonly textContent: string | null;
}
declare const document: {
  querySelector(selector: string): PageElement | null;
  querySelectorAll(selector: string): Iterable<PageElement>;
};
declare const navigator: object;
const MODEL = 'qwen3-coder-30b-a3b'; // the simulated engines' default preset

/** `promise`, or a rejection naming `what` after `ms`. */
async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

describe('rolling windows', () => {
  it('rate counts the last W complete seconds only', () => {
    const w = new RateWindow(5);
    for (let i = 0; i < 10; i++) w.add(10_000 + i * 100); // 10 events in second 10
    w.add(11_500, 5); // 5 in second 11
    expect(w.rate(11_900)).toBe(10 / 5); // second 11 is still running
    expect(w.rate(12_000)).toBe(15 / 5);
    expect(w.rate(15_999)).toBe(15 / 5);
    expect(w.rate(16_000)).toBe(5 / 5); // second 10 left the window
    expect(w.rate(17_000)).toBe(0);
    w.add(10_000 + 6_000); // reuses second 10's slot: cleared first
    expect(w.rate(17_000)).toBe(1 / 5);
  });

  it('p90 is within 2% of the exact nearest-rank quantile and ages out', () => {
    const w = new QuantileWindow(30);
    const samples: number[] = [];
    for (let i = 0; i < 1000; i++) {
      const ms = 5 + ((i * 7919) % 1000) * 3.7; // 5..3,700 ms, scrambled
      samples.push(ms);
      w.add(100_000 + i * 20, ms); // spread over 20 s
    }
    const exact = [...samples].sort((a, b) => a - b)[Math.ceil(0.9 * samples.length) - 1]!;
    const p90 = w.quantile(120_000, 0.9);
    expect(p90.samples).toBe(1000);
    expect(Math.abs(p90.value! - exact) / exact).toBeLessThan(0.021);
    expect(w.quantile(150_500, 0.9)).toEqual({ value: null, samples: 0 });
    for (const ms of [0.2, 1, 42, 1_000, 600_000]) expect(Math.abs(binValue(binOf(ms)) - ms) / ms).toBeLessThan(0.021);
    expect(binValue(binOf(0.01))).toBe(0.1); // below MIN_MS: bin 0
    expect(binOf(Number.NaN)).toBe(0);
    expect(binOf(1e12)).toBe(binOf(1e13)); // the last bin holds everything beyond
  });

  it('the observer keeps per-instance totals and a clamped hit rate', () => {
    let now = 50_000;
    const o = new DashboardObserver({ now: () => now });
    o.onFinished('http://a', 200, 10, { prompt_tokens: 100, cached_tokens: 40 });
    o.onFinished('http://a', 200, 10, { prompt_tokens: 100, cached_tokens: 500 }); // bogus: clamped to prompt
    o.onFinished('http://b', 502, 10, undefined);
    o.onFinished(undefined, 400, 1, undefined);
    o.onUpstreamError('http://b');
    o.onFirstByte('http://a', 120);
    expect(o.totals('http://a')).toMatchObject({ requests: 2, promptTokens: 200, cachedTokens: 140, errors: 0 });
    expect(o.totals('http://b')).toMatchObject({ requests: 1, errors: 1, upstreamErrors: 1, promptTokens: 0 });
    expect(o.totals('http://never')).toMatchObject({ requests: 0 });
    expect(o.fleet).toMatchObject({ requests: 4, errors: 2 });
    now = 51_000;
    expect(o.requestRate()).toBe(4 / 5);
    expect(Math.abs(o.ttftP90().value! - 120) / 120).toBeLessThan(0.021);
  });

  it('the observer counts offloads and fallbacks, and takes the p90 of prefill and transfer times', () => {
    let now = 50_000;
    const o = new DashboardObserver({ now: () => now, ttftWindowSeconds: 10 });
    expect(o.offloadP90()).toEqual({ prefill: null, transfer: null });
    for (let i = 1; i <= 10; i++) o.onOffload('http://p', 'http://d', 'v3', i * 100, undefined);
    o.onOffload('http://p', 'http://d', 'v3', 60_000, 'timeout'); // a fallback's time is not a prefill's
    o.onOffload('http://p', 'http://d', 'v3', 3, 'error');
    o.onOffloadTransfer('http://d', 'v3', 40);
    expect(o.offload).toEqual({ offloads: 10, fallbacks: 2 });
    const p90 = o.offloadP90();
    expect(Math.abs(p90.prefill! - 900) / 900).toBeLessThan(0.021);
    expect(Math.abs(p90.transfer! - 40) / 40).toBeLessThan(0.021);
    now = 70_000; // the window has passed; the counts stay
    expect(o.offloadP90()).toEqual({ prefill: null, transfer: null });
    expect(o.offload).toEqual({ offloads: 10, fallbacks: 2 });
  });
});

/** A stand-in for uWS's HttpResponse that records calls and fails loudly when touched after abort. */
class FakeResponse implements ClientResponse {
  readonly calls: string[] = [];
  written = '';
  writeOk = true;
  aborted = false;
  onAbortedHandler: (() => void) | undefined;
  onWritableHandler: ((offset: number) => boolean) | undefined;

  private touch(name: string): void {
    if (this.aborted) throw new Error(`${name} on an aborted response`);
    this.calls.push(name);
  }
  onAborted(h: () => void): this {
    this.onAbortedHandler = h;
    return this;
  }
  onWritable(h: (offset: number) => boolean): this {
    this.onWritableHandler = h;
    return this;
  }
  onData(): this {
    return this;
  }
  writeStatus(): this {
    this.touch('writeStatus');
    return this;
  }
  writeHeader(): this {
    this.touch('writeHeader');
    return this;
  }
  write(chunk: string): boolean {
    this.touch('write');
    this.written += chunk;
    return this.writeOk;
  }
  cork(cb: () => void): this {
    this.touch('cork');
    cb();
    return this;
  }
  end(): this {
    this.touch('end');
    return this;
  }
  close(): this {
    this.touch('close');
    this.abort();
    return this;
  }
  abort(): void {
    this.aborted = true;
    this.onAbortedHandler?.();
  }
}

describe('SSE hub', () => {
  it('writes frames corked, skips a backed-up subscriber, then closes it', () => {
    const counts: number[] = [];
    const hub = new SseHub((n) => counts.push(n));
    const slow = new FakeResponse();
    const fast = new FakeResponse();
    hub.subscribe(slow, '{"n":0}');
    hub.subscribe(fast, undefined);
    expect(slow.written).toBe('retry: 1000\n\ndata: {"n":0}\n\n');
    expect(slow.onAbortedHandler).toBeDefined();
    slow.writeOk = false;
    hub.broadcast('{"n":1}'); // buffered by uWS; slow is now backed up
    expect(slow.calls.slice(-2)).toEqual(['cork', 'write']);
    const writes = () => slow.calls.filter((c) => c === 'write').length;
    const before = writes();
    for (let i = 0; i < MAX_SKIPPED; i++) hub.broadcast(`{"n":${i + 2}}`);
    expect(writes()).toBe(before); // nothing more piles up on it
    expect(slow.onWritableHandler!(0)).toBe(true); // drained: frames resume
    slow.writeOk = true;
    hub.broadcast('{"n":9}');
    expect(writes()).toBe(before + 1);
    slow.writeOk = false;
    hub.broadcast('{"n":10}');
    for (let i = 0; i <= MAX_SKIPPED; i++) hub.broadcast('{}');
    expect(slow.aborted).toBe(true); // closed, and not touched after
    expect(slow.calls.at(-1)).toBe('close');
    expect(hub.size).toBe(1);
    expect(fast.written).toContain('data: {"n":10}\n\n');
    expect(counts).toEqual([1, 2, 1]);
  });

  it('never touches an aborted response, and close() ends the rest', () => {
    const counts: number[] = [];
    const hub = new SseHub((n) => counts.push(n));
    const a = new FakeResponse();
    const b = new FakeResponse();
    hub.subscribe(a, undefined);
    hub.subscribe(b, undefined);
    a.abort();
    hub.broadcast('{}'); // would throw if it wrote to `a`
    hub.close();
    expect(b.calls.slice(-2)).toEqual(['cork', 'end']);
    expect(hub.size).toBe(0);
    expect(counts).toEqual([1, 2, 1, 0]);
  });
});

describe('the page', () => {
  it('ships a script that parses', () => {
    expect(() => new Function(PAGE_SCRIPT)).not.toThrow();
    expect(() => new Function(LOCALE_GUARD_SCRIPT)).not.toThrow();
  });

  it('mounts on one proxy only, and a frame that fails to build never throws into uWS', () => {
    const warnings: string[] = [];
    const dashboard = createDashboard({ onWarning: (m) => warnings.push(m) });
    const handlers = new Map<string, RouteHandler>();
    const app: MountApp = {
      get: (pattern, handler) => void handlers.set(pattern, handler),
      post: () => {},
    };
    const req: ClientRequestHead = {
      forEach: () => {},
      getCaseSensitiveMethod: () => 'GET',
      getHeader: () => '',
      getQuery: () => '',
      getUrl: () => '/dashboard/frame',
    };
    const broken = () => {
      throw new Error('stats exploded');
    };
    const state = { router: { stats: broken }, snapshot: () => [] } as unknown as ProxyState;
    dashboard.mount(app, state);
    const routes = [...handlers.keys()];
    expect(routes).toEqual(expect.arrayContaining(['/', '/dashboard/app.js', '/dashboard/events', '/dashboard/frame']));
    expect(routes.some((r) => /^\/dashboard\/uplot-\d+\.\d+\.\d+\.min\.js$/.test(r))).toBe(true);
    expect(() => dashboard.mount(app, state)).toThrow(/already mounted/);

    let body: unknown;
    const res = new FakeResponse();
    Object.assign(res, { end: (b: unknown) => ((body = b), res) });
    for (let i = 0; i < 2; i++) handlers.get('/dashboard/frame')!(res, req);
    expect(body).toBe('{}');
    expect(warnings).toEqual([expect.stringMatching(/building a frame failed.*stats exploded/)]); // once
    dashboard.close();
  });

  it('streams frames over SSE on the proxy, forgets an aborted reader, ends streams on close', async () => {
    const dashboard = createDashboard({ intervalMs: 50 });
    const backends = ['http://127.0.0.1:9', 'http://127.0.0.1:10'];
    const proxy = createProxy({ backends, observers: [dashboard.observer], mounts: [dashboard.mount] });
    const readers: Array<ReadableStreamDefaultReader<Uint8Array>> = [];
    try {
      const { port } = await proxy.listen(0, '127.0.0.1');
      const base = `http://127.0.0.1:${port}`;
      const open = async (signal?: AbortSignal) => {
        const response = await fetch(`${base}/dashboard/events`, { signal });
        expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
        const reader = response.body!.getReader();
        readers.push(reader);
        return reader;
      };
      /** The next `n` frames of a stream (an event may span reads, a read may hold several). */
      const frames = async (reader: ReadableStreamDefaultReader<Uint8Array>, n: number) => {
        const decoder = new TextDecoder();
        let text = '';
        const out: DashboardFrame[] = [];
        while (out.length < n) {
          const { value, done } = await reader.read();
          if (done) throw new Error('the stream ended');
          text += decoder.decode(value, { stream: true });
          let end;
          while ((end = text.indexOf('\n\n')) >= 0) {
            const event = text.slice(0, end);
            text = text.slice(end + 2);
            if (event.startsWith('data: ')) out.push(JSON.parse(event.slice(6)) as DashboardFrame);
          }
        }
        return out;
      };

      const abort = new AbortController();
      const first = await open(abort.signal);
      const second = await open();
      const [a, b] = await frames(first, 2); // the one written on connect, then a tick
      expect(a!.instances.map((i) => i.id)).toEqual(backends);
      expect(a!).toMatchObject({ policy: 'min_ttft', requestsTotal: 0, ttftP90Ms: null, hitRate: null });
      expect(a!.instances.map((i) => i.engineHitRate)).toEqual([null, null]); // no reconcile round yet
      // The learned costs start at the preset's prior, with no observation.
      expect(a!.instances.map((i) => i.costObservations)).toEqual([0, 0]);
      for (const i of a!.instances) expect(i.prefillTokensPerSecond).toBeGreaterThan(0);
      dashboard.onReconcile([
        { instance: backends[1]!, released: 0, prefixCacheHitRatio: 0.4 },
        { instance: backends[0]!, released: 0, error: 'GET /metrics failed: ECONNREFUSED' },
      ]);
      expect(dashboard.frame()!.instances.map((i) => i.engineHitRate)).toEqual([null, 0.4]);
      expect(b!.t).toBeGreaterThanOrEqual(a!.t);
      expect(dashboard.subscribers).toBe(2);

      abort.abort(); // the client goes away: uWS reports the abort, the hub forgets it
      await vi.waitFor(() => expect(dashboard.subscribers).toBe(1), { timeout: 5_000, interval: 20 });
      expect((await frames(second, 2)).length).toBeGreaterThanOrEqual(2); // the other stream is unaffected

      const json = (await (await fetch(`${base}/dashboard/frame`)).json()) as DashboardFrame;
      expect(json.instances).toHaveLength(2);
      const page = await fetch(`${base}/`);
      expect(page.headers.get('content-security-policy')).toContain("default-src 'self'");
      expect(await page.text()).toContain('id="requests-total"');

      dashboard.close(); // ends the open stream
      const ended = (async () => {
        while (!(await second.read()).done); // frames already in flight, then the end
      })();
      await within(5_000, ended, 'the event stream to end after close()');
      expect(dashboard.subscribers).toBe(0);
      expect((await fetch(`${base}/dashboard/events`)).status).toBe(503);
    } finally {
      for (const r of readers) await r.cancel().catch(() => undefined);
      dashboard.close();
      await proxy.close({ graceMs: 0 });
    }
  });

  it('is closed by proxy.close(): an open event stream ends and the sampler stops', async () => {
    const dashboard = createDashboard({ intervalMs: 50 });
    const proxy = createProxy({
      backends: ['http://127.0.0.1:9'],
      observers: [dashboard.observer],
      mounts: [dashboard.mount],
    });
    try {
      const { port } = await proxy.listen(0, '127.0.0.1');
      const response = await fetch(`http://127.0.0.1:${port}/dashboard/events`);
      const reader = response.body!.getReader();
      await reader.read(); // the frame written on connect
      expect(dashboard.subscribers).toBe(1);
      const closing = proxy.close({ graceMs: 0 });
      await within(
        5_000,
        (async () => {
          while (!(await reader.read()).done);
        })(),
        'the event stream to end when the proxy closes',
      );
      await closing;
      expect(dashboard.subscribers).toBe(0);
    } finally {
      dashboard.close();
      await proxy.close({ graceMs: 0 });
    }
  });

  it('shows live numbers in headless Chromium', async () => {
    let fleet: SimFleet | undefined;
    let proxy: Proxy | undefined;
    let browser: Browser | undefined;
    const dashboard = createDashboard();
    try {
      fleet = await startSimFleet({ instances: 2, port: 0, speed: 50 });
      proxy = createProxy({
        backends: fleet.urls,
        observers: [dashboard.observer],
        mounts: [dashboard.mount],
        flow: { tenants: { metered: { rpm: 2 } } }, // its third request in a minute: 429 rate_limited
      });
      const { port } = await proxy.listen(0, '127.0.0.1');
      const base = `http://127.0.0.1:${port}`;

      browser = await launchBrowser();
      const page = await newPage(browser, { viewport: { width: 1280, height: 960 } });
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(String(error)));
      page.on('console', (m) => {
        if (m.type() === 'error') pageErrors.push(m.text());
      });
      page.on('response', (r) => {
        if (r.status() >= 400) pageErrors.push(`${r.status()} ${r.url()}`);
      });
      page.setDefaultTimeout(15_000);
      await page.goto(`${base}/`, { waitUntil: 'load' });

      // The first frame arrives on connect: both backends listed, the counter at 0.
      await page.waitForFunction(() => document.querySelector('#requests-total')?.getAttribute('data-value') !== '');
      const before = Number(await page.getAttribute('#requests-total', 'data-value'));
      expect(before).toBe(0);
      for (const url of fleet.urls) {
        await page.waitForSelector(`#instances tr[data-instance="${url}"]`);
        expect(await page.textContent(`#instances tr[data-instance="${url}"] .in-flight`)).toBe('0');
      }
      expect(await page.textContent('#status')).toBe('live');
      expect(await page.locator('#chart-rate canvas').count()).toBe(1); // uPlot drew a chart
      expect(await page.getAttribute('#offloads', 'data-value')).toBe('0'); // no offload policy
      expect(await page.textContent('#prefill-p90')).toBe('–');
      // A rate limit is configured, so flow control is on; nothing decided yet.
      expect(await page.getAttribute('#tenants-panel', 'data-state')).toBe('idle');
      expect(await page.textContent('#tenants tr.empty')).toMatch(/no requests in the last 30 s/);

      // Requests through the proxy: a session's turns (cache hits on one engine) and fresh prompts.
      const send = async (session: string, content: string): Promise<void> => {
        const response = await fetch(`${base}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-session-id': session },
          body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }], max_tokens: 8 }),
        });
        expect(response.status).toBe(200);
        await response.arrayBuffer();
      };
      const context = 'You are a coding agent. '.repeat(200);
      for (let turn = 1; turn <= 3; turn++) await send('s1', `${context} turn ${turn}`);
      await Promise.all([1, 2, 3].map((k) => send(`s${k + 1}`, `fresh prompt ${k} `.repeat(50 * k))));

      await page.waitForFunction(
        (previous) => Number(document.querySelector('#requests-total')?.getAttribute('data-value')) > previous,
        before,
        { timeout: 15_000, polling: 100 },
      );
      await page.waitForFunction(
        () => Number(document.querySelector('#requests-total')?.getAttribute('data-value')) === 6,
      );
      // The session's later turns hit the cache: some engine reports a hit rate above 0.
      await page.waitForFunction(() =>
        [...document.querySelectorAll('#instances td.hit-rate')].some(
          (td) => Number(td.getAttribute('data-value')) > 0,
        ),
      );
      const rows = await page.$$eval('#instances tr[data-instance]', (trs) =>
        trs.map((tr) => ({
          id: tr.getAttribute('data-instance'),
          requests: Number(tr.querySelector('.requests')?.getAttribute('data-value')),
          kv: tr.querySelector('.kv-usage')?.getAttribute('data-value'),
          models: tr.querySelector('.models')?.textContent,
        })),
      );
      expect(rows.map((r) => r.id).sort()).toEqual([...fleet.urls].sort());
      expect(rows.map((r) => r.models)).toEqual(fleet!.urls.map(() => fleet!.engines[0]!.model)); // discovered
      expect(rows.reduce((n, r) => n + r.requests, 0)).toBe(6);
      for (const r of rows) expect(Number(r.kv)).toBeGreaterThanOrEqual(0);
      const decisions = await page.$$eval('#decisions tr[data-reason] .count', (tds) =>
        tds.reduce((n, td) => n + Number(td.getAttribute('data-value')), 0),
      );
      expect(decisions).toBe(6);
      // The learned costs (serve --costs learned, the default): each row's prefill speed and the
      // first tokens it rests on, one per request.
      await page.waitForFunction(
        () =>
          [...document.querySelectorAll('#instances td.prefill-speed')].reduce(
            (n, td) => n + Number(/\((\d+) obs\)/.exec(td.textContent ?? '')?.[1] ?? 0),
            0,
          ) === 6,
      );
      const speeds = await page.$$eval('#instances td.prefill-speed', (tds) =>
        tds.map((td) => Number(td.getAttribute('data-value'))),
      );
      for (const speed of speeds) expect(speed).toBeGreaterThan(0);
      // The TTFT p90 and the request rate reach the tiles (the rate needs one complete second).
      await page.waitForFunction(() => document.querySelector('#ttft-p90')?.getAttribute('data-value') !== '');
      await page.waitForFunction(() => Number(document.querySelector('#request-rate')?.getAttribute('data-value')) > 0);

      // A reconcile round's engine-side hit ratios reach their column (a real round on the fleet).
      const round = await new ShadowReconciler({
        router: proxy.router,
        onRound: (results) => dashboard.onReconcile(results),
      }).reconcileOnce();
      const answered = round.filter((r) => r.prefixCacheHitRatio !== undefined);
      expect(answered.length).toBeGreaterThan(0);
      for (const r of answered)
        await page.waitForFunction(
          ([url, ratio]) =>
            document
              .querySelector(`#instances tr[data-instance="${url}"] td.engine-hit-rate`)
              ?.getAttribute('data-value') === String(ratio),
          [r.instance, r.prefixCacheHitRatio] as const,
        );

      // An offload and a fallback, as the exchange reports them (test/proxy-offload.test.ts drives
      // the exchange itself), reach the offload tiles.
      dashboard.observer.onOffload!(fleet.urls[1]!, fleet.urls[0]!, 'v3', 250, undefined);
      dashboard.observer.onOffload!(fleet.urls[1]!, fleet.urls[0]!, 'v3', 12, 'status');
      dashboard.observer.onOffloadTransfer!(fleet.urls[0]!, 'v3', 45);
      await page.waitForFunction(() => document.querySelector('#offloads')?.getAttribute('data-value') === '1');
      expect(await page.getAttribute('#offload-fallbacks', 'data-value')).toBe('1');
      expect(Math.abs(Number(await page.getAttribute('#prefill-p90', 'data-value')) - 250)).toBeLessThan(6);
      expect(Math.abs(Number(await page.getAttribute('#transfer-p90', 'data-value')) - 45)).toBeLessThan(1);

      // Two tenants through flow control: acme twice, metered three times (the third refused).
      const asTenant = async (tenant: string): Promise<number> => {
        const response = await fetch(`${base}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-kvroute-tenant': tenant },
          body: JSON.stringify({
            model: MODEL,
            messages: [{ role: 'user', content: `hi from ${tenant}` }],
            max_tokens: 8,
          }),
        });
        await response.arrayBuffer();
        return response.status;
      };
      const statuses = [];
      for (const tenant of ['acme', 'metered', 'acme', 'metered', 'metered']) statuses.push(await asTenant(tenant));
      expect(statuses).toEqual([200, 200, 200, 200, 429]);
      const tenantRow = (tenant: string) => `#tenants tr[data-tenant="${tenant}"][data-priority="normal"]`;
      // The frame that holds the refusal holds every decision before it (observers hear them in order).
      await page.waitForFunction(() =>
        [...document.querySelectorAll('#tenants td[data-outcome="rate_limited"]')].some(
          (td) => td.getAttribute('data-value') === '1',
        ),
      );
      expect(await page.getAttribute('#tenants-panel', 'data-state')).toBe('live');
      const panel = await page.$$eval('#tenants tr[data-tenant]', (trs) =>
        trs.map((tr) => {
          const outcomes: Record<string, number> = {};
          for (const td of tr.querySelectorAll('td[data-outcome]'))
            outcomes[td.getAttribute('data-outcome')!] = Number(td.getAttribute('data-value'));
          return { tenant: tr.getAttribute('data-tenant'), priority: tr.getAttribute('data-priority'), outcomes };
        }),
      );
      // The six requests before carried no tenant header: the `default` tenant. Most traffic first.
      expect(panel).toEqual([
        {
          tenant: 'default',
          priority: 'normal',
          outcomes: { admitted: 6, rate_limited: 0, queue_full: 0, queue_timeout: 0 },
        },
        {
          tenant: 'metered',
          priority: 'normal',
          outcomes: { admitted: 2, rate_limited: 1, queue_full: 0, queue_timeout: 0 },
        },
        {
          tenant: 'acme',
          priority: 'normal',
          outcomes: { admitted: 2, rate_limited: 0, queue_full: 0, queue_timeout: 0 },
        },
      ]);
      expect(await page.textContent(`${tenantRow('acme')} .waiting`)).toBe('0');
      expect(await page.getAttribute(`${tenantRow('acme')} .wait-p90`, 'data-value')).toBe('0'); // a slot was free
      expect(Number(await page.getAttribute(`${tenantRow('acme')} .tokens-in`, 'data-value'))).toBeGreaterThan(0);
      expect(await page.textContent(`${tenantRow('acme')} .rpm-left`)).toBe('–'); // no limit
      // metered's bucket: 2 a minute, both spent (refilling at one per 30 s).
      expect(Number(await page.getAttribute(`${tenantRow('metered')} .rpm-left`, 'data-value'))).toBeLessThan(1);
      expect(await page.textContent(`${tenantRow('metered')} .rpm-left`)).toBe('0 / 2');
      expect(await page.getAttribute(`${tenantRow('metered')} td[data-outcome="rate_limited"]`, 'class')).toContain(
        'refused',
      );

      const shot = process.env.KVROUTE_DASHBOARD_SCREENSHOT;
      if (shot) await page.screenshot({ path: shot, fullPage: true });
      expect(pageErrors).toEqual([]);
    } finally {
      await browser?.close();
      dashboard.close();
      await proxy?.close({ graceMs: 0 });
      await fleet?.close();
    }
  });

  // The npm-shipped Chromium without a locale reports `en-US@posix`; Intl rejects that tag and
  // uPlot, which builds a number formatter from it when it loads, used to leave the page blank.
  it('draws numbers under a locale tag Intl rejects', async () => {
    let fleet: SimFleet | undefined;
    let proxy: Proxy | undefined;
    let browser: Browser | undefined;
    const dashboard = createDashboard();
    try {
      fleet = await startSimFleet({ instances: 1, port: 0, speed: 50 });
      proxy = createProxy({ backends: fleet.urls, observers: [dashboard.observer], mounts: [dashboard.mount] });
      const { port } = await proxy.listen(0, '127.0.0.1');
      browser = await launchBrowser();
      const page = await newPage(browser);
      // Every Chromium build: the page sees the bad tag whatever the context's locale is.
      await page.addInitScript(() => {
        Object.defineProperty(Object.getPrototypeOf(navigator), 'language', { get: () => 'en-US@posix' });
      });
      const pageErrors: string[] = [];
      page.on('pageerror', (error) => pageErrors.push(String(error)));
      page.setDefaultTimeout(15_000);
      await page.goto(`http://127.0.0.1:${port}/`, { waitUntil: 'load' });
      await page.waitForFunction(() => document.querySelector('#status')?.getAttribute('data-value') === 'live');
      expect(await page.getAttribute('html', 'data-locale-fallback')).toBe('en-US@posix');
      expect(await page.textContent('#requests-total')).toBe('0');
      expect(await page.locator('#chart-rate canvas').count()).toBe(1);
      expect(pageErrors).toEqual([]);
    } finally {
      await browser?.close();
      dashboard.close();
      await proxy?.close({ graceMs: 0 });
      await fleet?.close();
    }
  });
});
