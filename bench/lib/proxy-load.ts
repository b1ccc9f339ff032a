/**
 * Load for the proxy benchmark (issue #6), loopback only, bounded in count and time.
 *
 * - `closedLoop`: autocannon, `connections` keep-alive connections each with one request in
 *   flight, for a duration or a fixed count. autocannon's own histogram keeps whole milliseconds,
 *   so every response's time (float ms from process.hrtime, request written → response parsed) is
 *   taken from its `response` event and kept at full resolution.
 * - `openStreams`: `streams` SSE requests in flight at once (node:http, one keep-alive socket
 *   each; stream i sends request i modulo their number), each read to `data: [DONE]`, replaced as it ends until the duration is over, then the
 *   last ones drained. A stream counts as an error when it fails to connect, answers other than
 *   200, carries an `error` event, or ends (or times out) without `[DONE]`, the expected number of
 *   content chunks, or its usage chunk.
 */
import http from 'node:http';

import autocannon from 'autocannon';

/** Latency percentiles in µs of a sample set (nearest rank). */
export function percentiles(samples: Float64Array): { p50_us: number; p99_us: number } {
  if (samples.length === 0) return { p50_us: NaN, p99_us: NaN };
  const sorted = Float64Array.from(samples).sort();
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
  return { p50_us: at(0.5), p99_us: at(0.99) };
}

/** A Float64Array that grows. */
class Samples {
  private data = new Float64Array(1 << 14);
  length = 0;
  push(x: number) {
    if (this.length === this.data.length) {
      const grown = new Float64Array(this.data.length * 2);
      grown.set(this.data);
      this.data = grown;
    }
    this.data[this.length++] = x;
  }
  view() {
    return this.data.subarray(0, this.length);
  }
}

/** Where the load goes, and its requests (a body and its headers each; used in turn). */
export interface Target {
  port: number;
  path: string;
  requests: { body: string; headers: Record<string, string> }[];
}

export interface LoopResult {
  /** 2xx responses. */
  ok: number;
  /** Socket errors, timeouts and non-2xx answers. */
  errors: number;
  seconds: number;
  rps: number;
  /** Every 2xx response's time, µs. */
  latencies: Float64Array;
}

/** autocannon against 127.0.0.1:port, `connections` in a closed loop, for `seconds` or `amount`. */
export async function closedLoop(
  target: Target,
  load: { connections: number; seconds?: number; amount?: number },
): Promise<LoopResult> {
  const latencies = new Samples();
  const started = performance.now();
  const instance = autocannon({
    url: `http://127.0.0.1:${target.port}${target.path}`,
    // Every connection cycles through the requests; autocannon builds each one's bytes once.
    requests: target.requests.map((r) => ({
      method: 'POST',
      path: target.path,
      headers: { 'content-type': 'application/json', ...r.headers },
      body: r.body,
    })),
    connections: load.connections,
    ...(load.amount !== undefined ? { amount: load.amount } : { duration: load.seconds ?? 1 }),
    timeout: 10,
    renderProgressBar: false,
    renderResultsTable: false,
  });
  let last = started;
  instance.on('response', (_client: unknown, status: number, _bytes: number, ms: number) => {
    last = performance.now();
    if (status >= 200 && status < 300) latencies.push(ms * 1000);
  });
  const result = await instance;
  // Up to the last response: autocannon notices a counted run's end only at its next 1 s tick.
  const seconds = (last - started) / 1000;
  const ok = result['2xx'];
  return {
    ok,
    errors: result.errors + result.timeouts + result.non2xx,
    seconds,
    rps: seconds > 0 ? ok / seconds : 0,
    latencies: latencies.view(),
  };
}

export interface StreamResult {
  /** Streams read to [DONE] with every chunk. */
  complete: number;
  /** Failed to connect, reset, non-200, or an error event. */
  errors: number;
  /** Ended or timed out without [DONE], a chunk short, or without the usage chunk. */
  incomplete: number;
  /** The first error's description, for the report. */
  firstError: string | undefined;
  seconds: number;
  streamsPerSecond: number;
  /** Request written → first byte of the body, µs, complete streams. */
  ttfb: Float64Array;
  /** Request written → [DONE], µs, complete streams. */
  total: Float64Array;
}

/**
 * Keeps `streams` SSE requests in flight against 127.0.0.1:port for `seconds`, then drains.
 * `chunks` is the number of content chunks the stub sends; `timeoutMs` bounds each stream.
 */
export async function openStreams(
  target: Target,
  load: { streams: number; seconds: number; chunks: number; timeoutMs: number },
): Promise<StreamResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: load.streams, maxFreeSockets: load.streams });
  const requests = target.requests.map((r) => {
    const body = Buffer.from(r.body);
    return {
      body,
      headers: { 'content-type': 'application/json', 'content-length': String(body.length), ...r.headers },
    };
  });
  const ttfb = new Samples();
  const total = new Samples();
  const counts = { complete: 0, errors: 0, incomplete: 0, firstError: undefined as string | undefined };
  const fail = (kind: 'errors' | 'incomplete', what: string) => {
    counts[kind]++;
    counts.firstError ??= what;
  };
  const started = performance.now();
  const deadline = started + load.seconds * 1000;

  const one = (lane: number) =>
    new Promise<void>((resolve) => {
      const { body, headers } = requests[lane % requests.length]!;
      const t0 = performance.now();
      let settled = false;
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        outcome();
        resolve();
      };
      const req = http.request(
        { host: '127.0.0.1', port: target.port, path: target.path, method: 'POST', headers, agent },
        (res) => {
          if (res.statusCode !== 200) {
            res.resume();
            return settle(() => fail('errors', `HTTP ${res.statusCode}`));
          }
          let first = -1;
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            if (first < 0) first = performance.now();
            text += chunk;
          });
          res.on('end', () =>
            settle(() => {
              const verdict = checkStream(text, load.chunks);
              if (verdict === undefined) {
                counts.complete++;
                ttfb.push((first - t0) * 1000);
                total.push((performance.now() - t0) * 1000);
              } else fail(verdict.startsWith('error event') ? 'errors' : 'incomplete', verdict);
            }),
          );
          res.on('error', (e) => settle(() => fail('incomplete', `response: ${e.message}`)));
          // after 'end' (settled already) or instead of it, when the connection goes mid-stream
          res.on('close', () => settle(() => fail('incomplete', 'connection closed before the stream ended')));
        },
      );
      req.setTimeout(load.timeoutMs, () => {
        settle(() => fail('incomplete', `no [DONE] within ${load.timeoutMs} ms`));
        req.destroy();
      });
      req.on('error', (e) => settle(() => fail('errors', `request: ${e.message}`)));
      req.end(body);
    });

  // A server that fails at once would otherwise be asked again and again until the deadline.
  const flooded = () => counts.errors + counts.incomplete > 10 * load.streams;
  const lane = async (_: unknown, i: number) => {
    while (performance.now() < deadline && !flooded()) await one(i);
  };
  await Promise.all(Array.from({ length: load.streams }, lane));
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  return {
    ...counts,
    seconds,
    streamsPerSecond: counts.complete / seconds,
    ttfb: ttfb.view(),
    total: total.view(),
  };
}

/** undefined when `text` is a whole stub stream; otherwise what is wrong with it. */
export function checkStream(text: string, chunks: number): string | undefined {
  const events = text.split('\n\n').filter((e) => e !== '');
  if (events.some((e) => e.startsWith('data: {"error"'))) return `error event: ${text.slice(0, 200)}`;
  if (events[events.length - 1] !== 'data: [DONE]') return `ended without [DONE] after ${events.length} events`;
  const usage = events[events.length - 2] ?? '';
  if (!usage.includes('"usage"')) return 'no usage chunk before [DONE]';
  if (events.length - 2 !== chunks) return `${events.length - 2} content chunks, expected ${chunks}`;
  return undefined;
}
