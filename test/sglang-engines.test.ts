/**
 * A mixed vLLM + SGLang fleet end to end: two `sim serve` engines speak vLLM, two speak SGLang
 * (`--flavor sglang`: SGLang's metric names and labels, its per-page KV events with signed int64
 * hashes, its routes and error bodies). The proxy subscribes to all four engines' events and
 * tokenizes like them; every session turn's predicted cached tokens must equal what the engine
 * served, on either kind of engine. Reconcile reads SGLang's gauges; SGLang's routes answer as
 * SGLang's do.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { Router } from '../src/core/router.js';
import { applyKvEvents } from '../src/events/direct-kv-events.js';
import { unpackKvEventBatch } from '../src/events/kv-event-batch.js';
import { decodeTimeCounters } from '../src/state/decode-time-samples.js';
import {
  countsFromMetrics,
  parseExposition,
  prefixCacheHitRatio,
  scrapeEngine,
} from '../src/state/engine-metrics-scrape.js';
import { TokenizerPool } from '../src/tokenize/tokenizer-pool.js';
import { encodeKvEventBatch, sglangHash } from '../src/sim/kv-event-encoding.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { MODEL, startProxy, type ProxyRig } from './helpers/proxy-harness.js';
import { poolTokenizer } from './helpers/pool-tokenizer.js';
import { waitFor } from './helpers/wait-for.js';

let vllm: SimFleet;
let sglang: SimFleet;
let enginePool: TokenizerPool;
let rig: ProxyRig;
const engines = () => [...vllm.engines, ...sglang.engines];
const urls = () => [...vllm.urls, ...sglang.urls];

beforeAll(async () => {
  enginePool = await TokenizerPool.open({ tokenizers: { '*': 'qwen3' }, threads: 1 });
  const tokenizer = poolTokenizer(enginePool);
  vllm = await startSimFleet({ instances: 2, port: 0, speed: 50, kvEvents: { port: 0 }, tokenizer, model: MODEL });
  sglang = await startSimFleet({
    instances: 2,
    port: 0,
    speed: 50,
    kvEvents: { port: 0 },
    tokenizer,
    model: MODEL,
    flavor: 'sglang',
  });
  rig = await startProxy({
    backends: engines().map((e, k) => ({ url: urls()[k]!, kvEvents: e.kvEventPublisher!.endpoint })),
    tokenizers: { [MODEL]: 'qwen3' },
    policy: 'min_ttft',
  });
  await waitFor("every engine's KV events subscription to be live", () =>
    rig.proxy.router.stats().instances.every((i) => i.kvEvents?.fed === true),
  );
}, 60_000);
afterAll(async () => {
  await rig?.close();
  await vllm?.close();
  await sglang?.close();
  await enginePool?.close();
});

/** Waits until the proxy holds every KV event message each engine has published. */
async function eventsIn(): Promise<void> {
  const behind = () => {
    const instances = rig.proxy.router.stats().instances;
    return engines().flatMap((engine, k) => {
      const received = instances.find((i) => i.instance === urls()[k])?.kvEvents?.messages ?? 0;
      return received >= engine.kvEventPublisher!.seq ? [] : [{ engine: k, received }];
    });
  };
  await waitFor("the proxy to receive the engines' KV events", () => behind().length === 0, { detail: behind });
}

const text = (session: number, turn: number) =>
  `Session ${session} turn ${turn}: ${'a mixed fleet routes by what each engine holds; '.repeat(25)}`;

describe('a mixed vLLM + SGLang fleet behind the proxy', () => {
  it('predicts every turn exactly on both kinds of engine, from their own events', async () => {
    const seen: Array<{ engine: string; predicted: number; cached: number }> = [];
    for (let session = 0; session < 6; session++) {
      const messages: Array<{ role: 'user' | 'assistant'; content: string }> = [];
      for (let turn = 0; turn < 3; turn++) {
        messages.push({ role: 'user', content: text(session, turn) });
        const { data, response } = await rig.client.chat.completions
          .create({ model: MODEL, messages, max_tokens: 4 }, { headers: { 'x-session-id': `s${session}` } })
          .withResponse();
        messages.push({ role: 'assistant', content: data.choices[0]!.message.content ?? '' });
        seen.push({
          engine: response.headers.get('x-kvroute-instance')!,
          predicted: Number(response.headers.get('x-kvroute-predicted-cached-tokens')),
          cached: data.usage!.prompt_tokens_details!.cached_tokens!,
        });
        await eventsIn();
      }
    }
    expect(seen.map((s) => s.predicted)).toEqual(seen.map((s) => s.cached));
    // Later turns hit, on SGLang engines too (the proxy spreads sessions over all four).
    const onSglang = seen.filter((s) => sglang.urls.includes(s.engine));
    expect(onSglang.length).toBeGreaterThan(0);
    expect(onSglang.some((s) => s.cached > 0)).toBe(true);
    const stats = rig.proxy.router.stats().instances;
    for (const url of sglang.urls) {
      const feed = stats.find((i) => i.instance === url)!.kvEvents!;
      expect(feed.malformed).toBe(0);
    }
  }, 120_000);

  it("exports SGLang's metrics, which reconcile, the hit ratio and the decode samples read", async () => {
    const url = sglang.urls[0]!;
    const text = await (await fetch(`${url}/metrics`)).text();
    for (const name of [
      'sglang:num_running_reqs',
      'sglang:num_queue_reqs',
      'sglang:token_usage',
      'sglang:cache_hit_rate',
      'sglang:prompt_tokens_total',
      'sglang:cached_tokens_total',
      'sglang:inter_token_latency_seconds_count',
    ])
      expect(text).toMatch(new RegExp(`^${name}\\{[^}]*tp_rank="0"[^}]*\\} `, 'm'));
    expect(text).not.toMatch(/^vllm:/m);
    const scrape = await scrapeEngine(url, 2000);
    expect(typeof scrape).toBe('object');
    if (typeof scrape === 'string') return;
    expect(scrape.counts.prefixCacheQueries).toBeGreaterThan(0);
    expect(scrape.prefixCacheHitRatio).toBeGreaterThan(0);
    expect(decodeTimeCounters(scrape.samples).count).toBeGreaterThan(0);
    // A second tensor-parallel rank mirrors rank 0: it is not counted twice.
    const mirrored = 'sglang:num_running_reqs{tp_rank="1"} 7\nsglang:num_running_reqs{tp_rank="0"} 7\n';
    const counts = countsFromMetrics(parseExposition(`${mirrored}sglang:num_queue_reqs{tp_rank="0"} 1\n`));
    expect(counts).toMatchObject({ running: 7, waiting: 1 });
    const ratioText = 'sglang:prompt_tokens_total 200\nsglang:cached_tokens_total 50\nsglang:cache_hit_rate 0.9\n';
    expect(prefixCacheHitRatio(parseExposition(ratioText))).toBe(0.25);
  });

  it("answers SGLang's routes and error bodies", async () => {
    const url = sglang.urls[1]!;
    expect((await fetch(`${url}/health`)).status).toBe(200);
    expect((await fetch(`${url}/health_generate`)).status).toBe(200);
    expect(await (await fetch(`${url}/get_model_info`)).json()).toMatchObject({
      model_path: MODEL,
      is_generation: true,
    });
    const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: Array<{ owned_by: string }> };
    expect(models.data[0]!.owned_by).toBe('sglang');
    const bad = await fetch(`${url}/v1/chat/completions`, { method: 'POST', body: '{' });
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({ object: 'error', type: 'BadRequestError', code: 400 });
    // Through the proxy, an SGLang engine's error body is relayed as it is.
    const relayed = await fetch(`${rig.base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': 'errors' },
      body: JSON.stringify({ model: MODEL, prompt: 'x', max_tokens: -1 }),
    });
    expect(relayed.status).toBe(400);
    const body = await relayed.json();
    const engine = relayed.headers.get('x-kvroute-instance')!;
    expect(body).toMatchObject(
      sglang.urls.includes(engine) ? { object: 'error', code: 400 } : { error: { code: 400 } },
    );
  });
});

describe("SGLang's KV event shapes", () => {
  it('one event per page, signed int64 hashes chained by parent, [ts, events, attn_dp_rank]', () => {
    const tokens = Array.from({ length: 48 }, (_, i) => i);
    const payload = encodeKvEventBatch(
      [
        { type: 'BlockStored', blockHashes: [1, 2, 3], parentBlockHash: null, tokenIds: tokens, blockSize: 16 },
        { type: 'BlockRemoved', blockHashes: [2, 3] },
      ],
      1.5,
      'sglang',
      1,
    );
    const batch = unpackKvEventBatch(payload);
    expect(batch.dataParallelRank).toBe(1);
    const events = batch.events as unknown[][];
    expect(events.map((e) => e[0])).toEqual([
      'BlockStored',
      'BlockStored',
      'BlockStored',
      'BlockRemoved',
      'BlockRemoved',
    ]);
    const hashes = [1, 2, 3].map(sglangHash);
    expect(hashes.some((h) => h < 0n)).toBe(true);
    expect(events.slice(0, 3).map((e) => [e[1], e[2], (e[3] as number[]).length])).toEqual([
      [[hashes[0]], null, 16],
      [[hashes[1]], hashes[0], 16],
      [[hashes[2]], hashes[1], 16],
    ]);
  });

  it('older SGLang events (no medium field) are read the same, negative hashes included', () => {
    const router = new Router({ instances: ['http://e'], blockSize: 16 });
    const tokens = Array.from({ length: 32 }, (_, i) => 500 + i);
    const older = [
      ['BlockStored', [-7n], null, tokens.slice(0, 16), 16, null],
      ['BlockStored', [9n], -7n, tokens.slice(16), 16, null],
      ['BlockRemoved', [9n]],
    ];
    expect(applyKvEvents(router, 'http://e', older)).toEqual({ events: 3, unknownEvents: 0 });
    // The first page is held; its child was stored, then removed.
    expect(router.match({ tokens: Uint32Array.from(tokens) })).toEqual({ 'http://e': 1 });
  });
});

describe('an engine whose blocks are not the router’s size', () => {
  it('is warned about once, naming both sizes and the flags that set them', () => {
    const warnings: string[] = [];
    const router = new Router({ instances: ['http://e'], blockSize: 16, onWarning: (w) => warnings.push(w) });
    // SGLang's default page: one token per block.
    const pages = Array.from({ length: 4 }, (_, i) => [
      'BlockStored',
      [BigInt(i + 1)],
      i === 0 ? null : BigInt(i),
      [i],
      1,
      null,
    ]);
    applyKvEvents(router, 'http://e', pages);
    applyKvEvents(router, 'http://e', pages);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(
      /instance http:\/\/e: the engine stores blocks of 1 tokens and the router keys blocks of 16.*SGLang --page-size/,
    );
  });
});
