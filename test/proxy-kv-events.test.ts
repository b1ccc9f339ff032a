/**
 * Token-exact keys end to end: `kvroute sim serve`'s engines tokenize with Qwen3's tokenizer,
 * cache by token blocks and publish vLLM KV events; the proxy subscribes to them, tokenizes each
 * request the same way on its workers, and routes on the event-fed index. Through the official
 * `openai` client: a session's later turns are predicted exactly (the proxy's
 * x-kvroute-predicted-cached-tokens equals the engine's usage.cached_tokens), a token-id prompt is
 * keyed without a tokenizer, and a model without a tokenizer falls back to text keys, saying so.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { createProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import { createProxy } from '../src/proxy/server/proxy-server.js';
import { TokenizerPool } from '../src/tokenize/tokenizer-pool.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { MODEL, startProxy, type ProxyRig } from './helpers/proxy-harness.js';
import { poolTokenizer } from './helpers/pool-tokenizer.js';
import { waitFor } from './helpers/wait-for.js';

let fleet: SimFleet;
const metrics = createProxyMetrics({ defaultMetrics: false });
let enginePool: TokenizerPool;
let rig: ProxyRig;
const warnings: string[] = [];

/** Every instance of `proxy` routes on its engine's events (its subscription is live). */
const allFed = (proxy: ProxyRig) => () => proxy.proxy.router.stats().instances.every((i) => i.kvEvents?.fed === true);

/** Per engine: KV event messages it has published, and how many of them `proxy` has received. */
function eventCounts(proxy: ProxyRig): Array<{ published: number; received: number }> {
  const instances = proxy.proxy.router.stats().instances;
  return fleet.engines.map((engine, k) => ({
    published: engine.kvEventPublisher!.seq,
    received: instances.find((i) => i.instance === fleet.urls[k])?.kvEvents?.messages ?? 0,
  }));
}

/**
 * Waits until `proxy` has received every message the engines published since `since` (an
 * eventCounts() taken before the request). An engine publishes the blocks it stores at the end
 * of the event-loop turn that stored them, so when its response reaches the client (a later turn
 * of this process), `seq` counts them; once they are received, the next turn can be predicted.
 * The feed applies what it received in a setImmediate, which runs before the next timer: the
 * poll that sees the count sees the events applied.
 */
async function eventsIn(proxy: ProxyRig, since: ReturnType<typeof eventCounts>): Promise<void> {
  const behind = () =>
    eventCounts(proxy).flatMap(({ published, received }, engine) =>
      received - since[engine]!.received >= published - since[engine]!.published
        ? []
        : [{ engine, published, received, since: since[engine] }],
    );
  await waitFor("the proxy to receive the engines' KV events of the last request", () => behind().length === 0, {
    detail: behind,
  });
}

beforeAll(async () => {
  enginePool = await TokenizerPool.open({ tokenizers: { '*': 'qwen3' }, threads: 1 });
  fleet = await startSimFleet({
    instances: 2,
    port: 0,
    speed: 50,
    kvEvents: { port: 0 },
    tokenizer: poolTokenizer(enginePool),
  });
  rig = await startProxy({
    backends: fleet.engines.map((e, k) => ({ url: fleet.urls[k]!, kvEvents: e.kvEventPublisher!.endpoint })),
    tokenizers: { [MODEL]: 'qwen3' },
    onWarning: (w) => warnings.push(w),
    mounts: [metrics.mount],
  });
  await waitFor("every engine's KV events subscription to be live", allFed(rig));
}, 60_000);
afterAll(async () => {
  await rig?.close();
  await fleet?.close();
  await enginePool?.close();
});

const text = (k: number) => `Turn ${k}: ${'the quick brown fox jumps over the lazy dog; '.repeat(30)}`;

describe('proxy: event-fed index with token-exact keys', () => {
  it("predicts a session's cached tokens exactly from the engines' events", async () => {
    const messages: Array<{ role: 'user' | 'assistant'; content: string }> = [];
    const seen: Array<{ predicted: number; cached: number; reason: string }> = [];
    for (let turn = 0; turn < 4; turn++) {
      messages.push({ role: 'user', content: text(turn) });
      const before = eventCounts(rig);
      const { data, response } = await rig.client.chat.completions
        .create({ model: MODEL, messages, max_tokens: 8 }, { headers: { 'x-session-id': 'session-1' } })
        .withResponse();
      messages.push({ role: 'assistant', content: data.choices[0]!.message.content ?? '' });
      seen.push({
        predicted: Number(response.headers.get('x-kvroute-predicted-cached-tokens')),
        cached: data.usage!.prompt_tokens_details!.cached_tokens!,
        reason: response.headers.get('x-kvroute-reason')!,
      });
      // The next turn must see this one's blocks: wait until the engine's events are in.
      await eventsIn(rig, before);
    }
    expect(seen.every((s) => !s.reason.includes('keys='))).toBe(true);
    expect(seen.slice(1).every((s) => s.cached > 0)).toBe(true);
    expect(seen.map((s) => s.predicted)).toEqual(seen.map((s) => s.cached));
    const stats = rig.proxy.router.stats().instances;
    expect(stats.reduce((n, i) => n + i.kvEvents!.heldKeys, 0)).toBeGreaterThan(0);
    const scrape = await (await fetch(`${rig.base}/metrics`)).text();
    for (const url of fleet.urls) expect(scrape).toContain(`kvroute_kv_events_fed{instance="${url}"} 1`);
    expect(scrape).toMatch(/kvroute_kv_events_held_blocks\{instance="[^"]+"\} [1-9]/);
    expect(scrape).toMatch(/kvroute_kv_events_blocks_total\{instance="[^"]+",event="stored"\} [1-9]/);
    expect(scrape).toMatch(/kvroute_tokenizer_tokens_total\{how="reused"\} [1-9]/);
  });

  it('keys a token-id prompt without a tokenizer, and falls back to text keys for a model without one', async () => {
    // A second proxy over the same engines, whose only tokenizer is another model's.
    const bare = await startProxy({
      backends: fleet.engines.map((e, k) => ({ url: fleet.urls[k]!, kvEvents: e.kvEventPublisher!.endpoint })),
      tokenizers: { 'some/other-model': 'qwen3' },
      onWarning: (w) => warnings.push(w),
    });
    try {
      await waitFor("the second proxy's KV events subscriptions to be live", allFed(bare));
      await tokenIdsAndFallback(bare);
    } finally {
      await bare.close();
    }
  }, 60_000);

  it("falls back to the belief index when an engine's event endpoint dies, with a warning and a metric", async () => {
    await fleet.engines[0]!.kvEventPublisher!.close();
    const url = fleet.urls[0]!;
    await waitFor(
      `${url}'s subscription to be down`,
      () => rig.proxy.router.stats().instances.find((i) => i.instance === url)!.kvEvents!.fed === false,
    );
    expect(warnings.join('\n')).toMatch(/disconnected; routing on the belief index until it returns/);
    const scrape = await (await fetch(`${rig.base}/metrics`)).text();
    expect(scrape).toContain(`kvroute_kv_events_fed{instance="${url}"} 0`);
    expect(scrape).toContain(`kvroute_kv_events_disconnects_total{instance="${url}"} 1`);
    // Requests still route (on the belief index for that engine).
    const { response } = await rig.client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: text(9) }], max_tokens: 2 })
      .withResponse();
    expect(response.status).toBe(200);
  });
});

async function tokenIdsAndFallback(rig: ProxyRig): Promise<void> {
  {
    const ids = Array.from({ length: 100 }, (_, i) => 100 + i);
    for (let k = 0; k < 2; k++) {
      const before = eventCounts(rig);
      const { data, response } = await rig.client.completions
        .create({ model: MODEL, prompt: ids, max_tokens: 2 })
        .withResponse();
      expect(response.headers.get('x-kvroute-reason')).not.toMatch(/keys=/);
      if (k === 1) {
        // 6 full blocks cached; vLLM never counts the whole prompt.
        expect(data.usage!.prompt_tokens_details!.cached_tokens).toBe(96);
        expect(Number(response.headers.get('x-kvroute-predicted-cached-tokens'))).toBe(96);
      }
      await eventsIn(rig, before);
    }
    const { response } = await rig.client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'hello' }], max_tokens: 2 })
      .withResponse();
    expect(response.headers.get('x-kvroute-reason')).toMatch(/; keys=text \(no tokenizer for the model\)$/);
    expect(rig.proxy.router.explain().keys).toBe('text');
  }
}

describe('proxy: tokenizer configuration', () => {
  it('refuses to start when a tokenizer fails to load, naming the file', async () => {
    const proxy = createProxy({
      backends: ['http://127.0.0.1:9'],
      tokenizers: { '*': '/nonexistent/qwen' },
      onWarning: () => {},
    });
    try {
      await expect(proxy.listen(0, '127.0.0.1')).rejects.toMatchObject({
        code: 'ERR_KVROUTE_TOKENIZER',
        message: expect.stringMatching(/^\/nonexistent\/qwen\/tokenizer\.json: missing/),
      });
    } finally {
      await proxy.close({ graceMs: 0 });
    }
  });

  it('refuses a malformed tokenizers option, naming the model', () => {
    expect(() => createProxy({ backends: ['http://127.0.0.1:9'], tokenizers: { m: '' } })).toThrow(
      /options\.tokenizers\["m"\] must be a tokenizer directory/,
    );
  });
});
