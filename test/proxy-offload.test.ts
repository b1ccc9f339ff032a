/**
 * Prefill offload through the proxy (issue #18; docs/proxy.md "Prefill offload"): vLLM's
 * disaggregated-prefill protocol, two phases per request, against fake engines that speak it
 * (helpers/offload-engine.ts).
 *
 * The routing core's `+offload` layer is built on another branch, so the decision is forced by
 * helpers/offload-router.ts (real tickets on both instances, routed by the real router); the
 * PrefillCall unit is also driven directly. Covered: non-streaming and streaming success (the
 * client gets the decode instance's answer, the prefill got max_tokens 1 and do_remote_decode,
 * the decode got the params), kv_transfer_params never reaching the client, every fallback (5xx,
 * connection refused, timeout, no params), client abort in each phase, the request deadline
 * during the prefill, and the metrics and request-log records. Both upstream clients, both
 * server modes.
 */
import { once, type EventEmitter } from 'node:events';

import type OpenAI from 'openai';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';

import { offloadReason } from '../src/core/offload-reason.js';
import { formatRecord } from '../src/proxy/observe/access-log.js';
import { Backend } from '../src/proxy/upstream/backend.js';
import { PrefillCall, type PrefillOutcome } from '../src/proxy/offload/offload-prefill.js';
import { createProxyMetrics, type ProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import type { ProxyOptions } from '../src/proxy/proxy-options.js';
import { parseExposition } from '../src/state/engine-metrics-scrape.js';
import { answerText, startFakeEngine, type FakeEngine, type FakeEngineOptions } from './helpers/offload-engine.js';
import { forceOffload, type ForcedOffload } from './helpers/offload-router.js';
import { MODEL, post, scopedRigs, type ProxyRig } from './helpers/proxy-harness.js';

let upstream: 'h1' | 'undici' = 'h1';
let http: 'uws' | 'node' = 'uws';
const rigs = scopedRigs(() => ({ upstream, http }));
afterEach(() => rigs.closeAll());

const PREFILL_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

/** What a prefill instance answers: its params, as the decode must receive them. */
const paramsOf = (prefill: FakeEngine) => ({
  do_remote_prefill: true,
  do_remote_decode: false,
  remote_engine_id: prefill.id,
  remote_block_ids: [3, 4, 5],
  remote_host: '127.0.0.1',
  remote_port: 5600,
  tp_size: 1,
});

interface OffloadRig extends ProxyRig {
  prefill: FakeEngine;
  decode: FakeEngine;
  forced: ForcedOffload;
  metrics: ProxyMetrics;
}

async function engine(options: FakeEngineOptions = {}): Promise<FakeEngine> {
  const e = await startFakeEngine(options);
  rigs.add(e.close);
  return e;
}

/** A decode and a prefill engine behind a proxy whose every request is offloaded from the one to the other. */
async function offloadRig(
  prefillOptions: FakeEngineOptions = {},
  decodeOptions: FakeEngineOptions = {},
  proxyOptions: Partial<ProxyOptions> = {},
): Promise<OffloadRig> {
  const decode = await engine(decodeOptions);
  const prefill = await engine(prefillOptions);
  const metrics = createProxyMetrics({ defaultMetrics: false });
  const rig = await rigs.proxyFor({
    backends: [decode.url, prefill.url],
    healthIntervalMs: 0,
    observers: [metrics.observer],
    mounts: [metrics.mount],
    ...proxyOptions,
  });
  const forced = forceOffload(rig.proxy, { decode: decode.url, prefill: prefill.url });
  return { ...rig, prefill, decode, forced, metrics };
}

const messages = [{ role: 'user' as const, content: 'a long prompt worth offloading '.repeat(40) }];

/** An engine's next `event`, its first argument (rejects after 5 s). */
const next = async (emitter: EventEmitter, event: string): Promise<unknown> =>
  (await once(emitter, event, { signal: AbortSignal.timeout(5_000) }))[0];

/** The router's per-instance counters. */
const stats = (rig: OffloadRig, url: string) => rig.proxy.router.stats().instances.find((i) => i.instance === url)!;

/** The base reason of the last routing plus the offload layer's note: x-kvroute-reason. */
const expectedReason = (rig: OffloadRig, offload = rig.forced.last) =>
  `${rig.observer.named('routed').at(-1)![2] as string}${offloadReason(offload)}`;

async function scrape(rig: ProxyRig) {
  return parseExposition(await (await fetch(`${rig.base}/metrics`)).text());
}

const sample = (samples: Awaited<ReturnType<typeof scrape>>, name: string, labels: Record<string, string>) =>
  samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;

/** Everything settled: no ticket, no in-flight slot left anywhere. */
function expectIdle(rig: OffloadRig): void {
  expect(rig.proxy.router.stats().inFlight).toBe(0);
  expect(rig.proxy.state.inFlight()).toEqual({ [rig.decode.url]: 0, [rig.prefill.url]: 0 });
}

describe('PrefillCall: the prefill phase as a unit, against a protocol-speaking engine', () => {
  const backends: Backend[] = [];
  afterEach(async () => {
    for (const b of backends.splice(0)) await b.close(0);
  });

  async function call(options: FakeEngineOptions, timeoutMs = 0, url?: string) {
    const e = url === undefined ? await engine(options) : undefined;
    const backend = new Backend(url ?? e!.url, undefined, {
      connections: 4,
      connectTimeoutMs: 2_000,
      firstByteTimeoutMs: 10_000,
      idleTimeoutMs: 10_000,
      upstream,
    });
    backends.push(backend);
    let settle: (o: PrefillOutcome) => void = () => {};
    const outcome = new Promise<PrefillOutcome>((resolve) => (settle = resolve));
    const prefill = new PrefillCall(backend, (o) => settle(o));
    const body = Buffer.from(
      JSON.stringify({ model: MODEL, messages, max_tokens: 1, stream: false, kv_transfer_params: PREFILL_PARAMS }),
    );
    prefill.start({ path: '/v1/chat/completions', headers: ['content-type', 'application/json'], body, timeoutMs });
    return { engine: e, prefill, outcome };
  }

  it('answers the params a prefill instance returns, as it wrote them', async () => {
    const { engine: e, outcome } = await call({});
    const got = await outcome;
    expect(got.ok).toBe(true);
    expect(JSON.parse((got as { params: string }).params)).toEqual(paramsOf(e!));
  });

  it('answers why there are none: a 503, an answer without params, a timeout, a refused connection', async () => {
    expect(await (await call({ prefill: 'status' })).outcome).toMatchObject({ ok: false, cause: 'status' });
    expect(await (await call({ prefill: 'no_params' })).outcome).toMatchObject({ ok: false, cause: 'params' });
    const hung = await call({ prefill: 'hang' }, 100);
    const closed = next(hung.engine!.events, 'closed');
    expect(await hung.outcome).toMatchObject({ ok: false, cause: 'timeout' });
    expect(await closed).toBe('prefill'); // the upstream request was aborted
    const dead = await engine();
    const url = dead.url;
    await dead.close();
    const refused = await (await call({}, 0, url)).outcome;
    expect(refused).toMatchObject({ ok: false, cause: 'error' });
    expect((refused as { error?: { code?: string } }).error?.code).toBe('ECONNREFUSED');
  });

  it('cancel(): the upstream request is aborted and no outcome follows', async () => {
    const e = await engine({ prefill: 'hang' });
    const arrived = next(e.events, 'request');
    const { prefill, outcome } = await call({}, 0, e.url);
    await arrived;
    const closed = next(e.events, 'closed');
    prefill.cancel();
    expect(await closed).toBe('prefill');
    const none = await Promise.race([outcome.then(() => 'outcome'), Promise.resolve('none')]);
    expect(none).toBe('none');
  });
});

describe.each([
  ['h1', 'uws'],
  ['undici', 'uws'],
  ['h1', 'node'],
] as const)('proxy prefill offload, upstream client %s, server %s', (client, server) => {
  beforeAll(() => {
    upstream = client;
    http = server;
  });

  it('non-streaming: the prefill gets max_tokens 1 and do_remote_decode, the decode its params, the client the decode answer', async () => {
    const rig = await offloadRig({}, { echo: true });
    const sent = { model: MODEL, messages, max_tokens: 7, max_completion_tokens: 7, min_tokens: 2, temperature: 0 };
    const { data, response } = await rig.client.chat.completions
      .create(sent as OpenAI.ChatCompletionCreateParamsNonStreaming)
      .withResponse();
    expect(data.choices[0]!.message.content).toBe(answerText(rig.decode.id, 'decode'));
    expect('kv_transfer_params' in data).toBe(false); // the engine echoed them; the proxy dropped them
    expect(response.headers.get('x-kvroute-instance')).toBe(rig.decode.url);
    expect(response.headers.get('x-kvroute-reason')).toBe(expectedReason(rig));
    expect(response.headers.get('x-kvroute-reason')).toContain(`; offload prefill=${rig.prefill.url}`);

    expect(rig.prefill.seen.map((r) => r.kind)).toEqual(['prefill']);
    const { min_tokens: _min, ...rest } = sent;
    expect(rig.prefill.seen[0]!.body).toEqual({
      ...rest,
      max_tokens: 1,
      max_completion_tokens: 1,
      stream: false,
      kv_transfer_params: PREFILL_PARAMS,
    });
    expect(rig.decode.seen.map((r) => r.kind)).toEqual(['decode']);
    expect(rig.decode.seen[0]!.body).toEqual({ ...sent, kv_transfer_params: paramsOf(rig.prefill) });
    expect(rig.prefill.seen[0]!.url).toBe('/v1/chat/completions');

    // Tickets: the prefill's completed on its instance, the decode's on the other.
    await rig.observer.until(() => rig.observer.named('request').length === 1);
    expectIdle(rig);
    expect(stats(rig, rig.prefill.url)).toMatchObject({ routed: 1, completed: 1, aborted: 0 });
    expect(stats(rig, rig.decode.url)).toMatchObject({ routed: 1, completed: 1, aborted: 0 });
    const record = rig.observer.records()[0]!;
    expect(record).toMatchObject({ status: 200, outcome: 'success', instance: rig.decode.url });
    expect(record.offload).toMatchObject({ prefillInstance: rig.prefill.url });
    expect(record.offload!.prefillMs).toBeGreaterThan(0);
    expect(record.offload!.fallback).toBeUndefined();
    const line = JSON.parse(formatRecord(record)) as Record<string, unknown>;
    expect(line.prefill_instance).toBe(rig.prefill.url);
    expect(line.prefill_ms).toBeGreaterThan(0);
    expect(line).not.toHaveProperty('offload_fallback');
  });

  it('streaming: the decode streams to the client with the params stripped from every chunk', async () => {
    const rig = await offloadRig({}, { echo: true });
    const stream = await rig.client.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 9,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(
      chunks
        .map((c) => c.choices[0]?.delta.content ?? '')
        .join('')
        .trim(),
    ).toBe(answerText(rig.decode.id, 'decode'));
    expect(chunks.some((c) => 'kv_transfer_params' in c)).toBe(false);
    const prefill = rig.prefill.of('prefill')[0]!.body;
    expect(prefill).toMatchObject({ max_tokens: 1, stream: false, kv_transfer_params: PREFILL_PARAMS });
    expect(prefill).not.toHaveProperty('stream_options');
    expect(rig.decode.of('decode')[0]!.body).toEqual({
      model: MODEL,
      messages,
      max_tokens: 9,
      stream: true,
      stream_options: { include_usage: true },
      kv_transfer_params: paramsOf(rig.prefill),
    });
    await rig.observer.until(() => rig.observer.named('offloadTransfer').length === 1);
    expect(rig.observer.named('offloadTransfer')[0]!.slice(1, 3)).toEqual([rig.decode.url, 'min_ttft']);
  });

  it('kv_transfer_params never reach the client: the raw bytes, JSON and SSE, completions endpoint', async () => {
    const rig = await offloadRig({}, { echo: true });
    for (const stream of [false, true]) {
      const response = await post(rig.base, '/v1/completions', { model: MODEL, prompt: 'x '.repeat(300), stream });
      expect(response.status).toBe(200);
      const text = await response.text();
      expect(text).toContain(rig.decode.id);
      expect(text).not.toContain('kv_transfer_params');
      expect(response.headers.get('x-kvroute-instance')).toBe(rig.decode.url);
    }
    expect(rig.decode.of('decode')).toHaveLength(2);
  });

  describe('a failed prefill falls back to co-located serving on the decode instance, counted', () => {
    /** Sends one chat request; the decode instance answers the client's own body. */
    async function fallsBack(rig: OffloadRig, cause: string) {
      const { data, response } = await rig.client.chat.completions
        .create({ model: MODEL, messages, max_tokens: 4 })
        .withResponse();
      expect(data.choices[0]!.message.content).toBe(answerText(rig.decode.id, 'plain'));
      expect(response.headers.get('x-kvroute-instance')).toBe(rig.decode.url);
      expect(response.headers.get('x-kvroute-reason')).toBe(expectedReason(rig));
      expect(rig.decode.seen.map((r) => r.kind)).toEqual(['plain']);
      expect(rig.decode.seen[0]!.body).toEqual({ model: MODEL, messages, max_tokens: 4 });
      await rig.observer.until(() => rig.observer.named('request').length === 1);
      expectIdle(rig);
      expect(stats(rig, rig.prefill.url)).toMatchObject({ routed: 1, completed: 0, aborted: 1 });
      expect(stats(rig, rig.decode.url)).toMatchObject({ routed: 1, completed: 1, aborted: 0 });
      const record = rig.observer.records()[0]!;
      expect(record).toMatchObject({ status: 200, outcome: 'success' });
      expect(record.offload).toMatchObject({ prefillInstance: rig.prefill.url, fallback: cause });
      expect(JSON.parse(formatRecord(record))).toMatchObject({ offload_fallback: cause });
      const samples = await scrape(rig);
      const labels = { prefill_instance: rig.prefill.url, instance: rig.decode.url, cause };
      expect(sample(samples, 'kvroute_offload_fallbacks_total', labels)).toBe(1);
      expect(sample(samples, 'kvroute_offloads_total', {})).toBeUndefined();
    }

    it('the prefill instance answers 503', async () => {
      const rig = await offloadRig({ prefill: 'status' });
      await fallsBack(rig, 'status');
      expect(rig.proxy.state.backend(rig.prefill.url)!.healthy).toBe(true); // a status is not a breaker trip
    });

    it('its connection is refused: counted as an upstream error, its breaker opens', async () => {
      const rig = await offloadRig();
      await rig.prefill.close();
      await fallsBack(rig, 'error');
      expect(rig.observer.named('upstreamError')[0]!.slice(1)).toEqual([rig.prefill.url, 'refused', false]);
      expect(rig.proxy.state.backend(rig.prefill.url)!.healthy).toBe(false);
    });

    it('it does not answer within --offload-prefill-timeout: the prefill request is aborted', async () => {
      const rig = await offloadRig({ prefill: 'hang' }, {}, { offloadPrefillTimeoutMs: 150 });
      const closed = next(rig.prefill.events, 'closed');
      await fallsBack(rig, 'timeout');
      expect(await closed).toBe('prefill');
      // Timers may fire a fraction of a millisecond before performance.now() says they are due.
      expect(rig.observer.named('offload')[0]![4]).toBeGreaterThan(140);
    });

    it('its answer has no kv_transfer_params', async () => {
      const rig = await offloadRig({ prefill: 'no_params' });
      await fallsBack(rig, 'params');
    });
  });

  it('client abort during the prefill: the prefill request is aborted, no decode is sent, tickets released', async () => {
    const rig = await offloadRig({ prefill: 'hang' });
    const arrived = next(rig.prefill.events, 'request');
    const controller = new AbortController();
    const request = rig.client.chat.completions.create(
      { model: MODEL, messages, max_tokens: 4 },
      { signal: controller.signal },
    );
    request.catch(() => {});
    await arrived;
    const closed = next(rig.prefill.events, 'closed');
    controller.abort();
    expect(await closed).toBe('prefill');
    await rig.observer.until(() => rig.observer.named('request').length === 1);
    expect(rig.observer.records()[0]).toMatchObject({ status: 499, outcome: 'client_abort' });
    expect(rig.decode.seen).toHaveLength(0);
    expect(rig.observer.named('offload')).toHaveLength(0); // not a fallback
    expectIdle(rig);
    expect(stats(rig, rig.prefill.url)).toMatchObject({ completed: 0, aborted: 1 });
    expect(stats(rig, rig.decode.url)).toMatchObject({ completed: 0, aborted: 1 });
  });

  it('client abort while the decode streams: the decode request is aborted; the prefill had completed', async () => {
    const rig = await offloadRig({}, { streamForever: true });
    const controller = new AbortController();
    const stream = await rig.client.chat.completions.create(
      { model: MODEL, messages, max_tokens: 4, stream: true },
      { signal: controller.signal },
    );
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.value?.choices[0]?.delta.content).toContain(rig.decode.id);
    const closed = next(rig.decode.events, 'closed');
    controller.abort();
    expect(await closed).toBe('decode');
    await rig.observer.until(() => rig.observer.named('request').length === 1);
    expect(rig.observer.records()[0]).toMatchObject({ status: 499, outcome: 'client_abort' });
    expectIdle(rig);
    expect(stats(rig, rig.prefill.url)).toMatchObject({ completed: 1, aborted: 0 });
    expect(stats(rig, rig.decode.url)).toMatchObject({ completed: 0, aborted: 1 });
  });

  it('--request-timeout during the prefill: 504, the prefill request aborted, no decode', async () => {
    const rig = await offloadRig({ prefill: 'hang' }, {}, { requestTimeoutMs: 200, offloadPrefillTimeoutMs: 0 });
    const closed = next(rig.prefill.events, 'closed');
    const response = await post(rig.base, '/v1/chat/completions', { model: MODEL, messages });
    expect(response.status).toBe(504);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('request_timeout');
    expect(await closed).toBe('prefill');
    expect(rig.decode.seen).toHaveLength(0);
    await rig.observer.until(() => rig.observer.named('request').length === 1);
    expectIdle(rig);
  });

  it('metrics: offloads by prefill and decode instance, fallbacks by cause, the prefill and transfer histograms', async () => {
    const rig = await offloadRig();
    await rig.client.chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
    const stream = await rig.client.chat.completions.create({ model: MODEL, messages, max_tokens: 2, stream: true });
    for await (const _ of stream);
    // The third request finds the prefill instance gone.
    await rig.prefill.close();
    await rig.client.chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
    await rig.observer.until(() => rig.observer.named('request').length === 3);
    const samples = await scrape(rig);
    const pair = { prefill_instance: rig.prefill.url, instance: rig.decode.url, policy: 'min_ttft' };
    expect(sample(samples, 'kvroute_offloads_total', pair)).toBe(2);
    expect(sample(samples, 'kvroute_offload_fallbacks_total', { ...pair, cause: 'error' })).toBe(1);
    const prefillLabels = { instance: rig.prefill.url, policy: 'min_ttft' };
    expect(sample(samples, 'kvroute_offload_prefill_seconds_count', prefillLabels)).toBe(2);
    expect(sample(samples, 'kvroute_offload_prefill_seconds_sum', prefillLabels)).toBeGreaterThan(0);
    expect(sample(samples, 'kvroute_offload_transfer_seconds_count', { instance: rig.decode.url })).toBe(1);
    expect(sample(samples, 'kvroute_requests_total', { instance: rig.decode.url, outcome: 'success' })).toBe(3);
  });

  it('a policy without the offload layer: one request, the reason without a note, no offload anywhere', async () => {
    const rig = await offloadRig();
    rig.forced.restore();
    const { response } = await rig.client.chat.completions
      .create({ model: MODEL, messages, max_tokens: 2 })
      .withResponse();
    expect(response.headers.get('x-kvroute-reason')).toMatch(/^[a-z_]+$/);
    const served = [...rig.decode.seen, ...rig.prefill.seen];
    expect(served.map((r) => r.kind)).toEqual(['plain']);
    await rig.observer.until(() => rig.observer.named('request').length === 1);
    expect(rig.observer.records()[0]!.offload).toBeUndefined();
    expect(rig.observer.named('offload')).toHaveLength(0);
  });
});
