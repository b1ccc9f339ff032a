/**
 * Prefill offload end to end, with nothing forced: the proxy routes with a real `+offload`
 * policy in front of `kvroute sim serve`'s engines, which speak vLLM's disaggregated-prefill
 * protocol. A session's first request decodes a long answer on its engine; its next turn, pinned
 * there by `sticky` and carrying 8k uncached tokens, would stall that decode, so the layer sends
 * its prefill to the idle engine, the KV moves over the simulated link, and the decode engine
 * serves the turn with the transferred prefix cached. Through the official `openai` client,
 * non-streaming and streaming; and a client that goes away during the prefill phase or during the
 * decode leaves no request running on either engine and no ticket open.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { createProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import type { SimFleet } from '../src/sim/sim-fleet.js';
import { startFleetProxy, type ProxyRig } from './helpers/proxy-harness.js';

const MODEL = 'qwen3-coder-30b-a3b';
/** About `tokens` tokens of prompt text for the simulated engines (4 characters a token). */
const text = (tokens: number, salt: string) => `${salt} ${'abcd'.repeat(tokens)}`.slice(0, 4 * tokens);

let rig: (ProxyRig & { fleet: SimFleet }) | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

async function metric(base: string, name: string): Promise<number> {
  const body = await (await fetch(`${base}/metrics`)).text();
  return [...body.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))].reduce((s, m) => s + Number(m[1]), 0);
}

/** Two simulated engines at `speed` behind a proxy routing with `sticky+offload`, with metrics. */
async function startRig(speed: number, options: { offloadPrefillTimeoutMs?: number } = {}) {
  const metrics = createProxyMetrics({ defaultMetrics: false });
  return startFleetProxy(
    2,
    { policy: 'sticky+offload', ...options, observers: [metrics.observer], mounts: [metrics.mount] },
    speed,
  );
}

/**
 * A session's first turn: `history` streamed with a long answer, returned once its first token
 * arrived, so its engine (pinned by `sticky`) is decoding it.
 */
async function startDecoding(client: ProxyRig['client'], history: string, user: string) {
  const decoding = await client.completions.create({
    model: MODEL,
    prompt: history,
    max_tokens: 4000,
    stream: true,
    user,
  });
  await decoding[Symbol.asyncIterator]().next();
  return decoding;
}

describe('prefill offload through the proxy and simulated engines', () => {
  it.each([false, true])(
    'offloads a long turn beside a running decode (stream %s)',
    async (stream) => {
      rig = await startRig(20);
      const { client, base } = rig;
      const history = text(4096, 'history');
      // Turn 1: pins the session to an engine and keeps decoding there.
      const decoding = await startDecoding(client, history, 'session-1');

      // Turn 2: the history plus 8k new tokens, on the same engine (sticky).
      const prompt = `${history}${text(8192, 'new')}`;
      const request = { model: MODEL, prompt, max_tokens: 4, user: 'session-1' };
      let reason: string | null;
      let cached: number | undefined;
      let raw: string;
      if (stream) {
        const { data, response } = await client.completions
          .create({ ...request, stream: true, stream_options: { include_usage: true } })
          .withResponse();
        reason = response.headers.get('x-kvroute-reason');
        const chunks: unknown[] = [];
        for await (const chunk of data) chunks.push(chunk);
        raw = JSON.stringify(chunks);
        const usage = chunks.map(
          (c) => (c as { usage?: { prompt_tokens_details?: { cached_tokens?: number } } }).usage,
        );
        cached = usage.find((u) => u)?.prompt_tokens_details?.cached_tokens;
      } else {
        const { data, response } = await client.completions.create(request).withResponse();
        reason = response.headers.get('x-kvroute-reason');
        raw = JSON.stringify(data);
        cached = data.usage?.prompt_tokens_details?.cached_tokens;
      }
      await decoding.controller.abort();

      // The decision, as the header tells it: offloaded to the other engine, with both costs.
      expect(reason).toMatch(/^pinned; offload prefill=\S+ interference=\d+ms > transfer=\d+ms cold$/);
      const [pinned, prefill] = [rig.fleet.urls, /prefill=(\S+)/.exec(reason!)![1]];
      expect(pinned).toContain(prefill);
      // The decode engine served the whole prompt from cache but its last token: its own history
      // blocks and the transferred ones.
      expect(cached).toBeGreaterThan(12_000);
      // Nothing kvroute or the engines added reaches the client.
      expect(raw).not.toContain('kv_transfer_params');
      expect(raw).not.toContain('remote_engine_id');
      // Counted, and the prefill ticket closed on the prefill instance.
      expect(await metric(base, 'kvroute_offloads_total')).toBe(1);
      expect(await metric(base, 'kvroute_offload_fallbacks_total')).toBe(0);
      const stats = rig.proxy.router.stats().instances.find((i) => i.instance === prefill)!;
      expect(stats).toMatchObject({ routed: 1, completed: 1 });
      // Each engine saw its half: one transfer into the decode engine.
      const transfers = await Promise.all(rig.fleet.urls.map((u) => metric(u, 'kvroute_sim_kv_transfers_total')));
      expect(transfers.sort()).toEqual([0, 1]);
    },
    30_000,
  );

  /** Waits until `check` holds, polling (bounded). */
  async function until(check: () => Promise<boolean>, what: string): Promise<void> {
    for (let i = 0; i < 500; i++) {
      if (await check()) return;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`timed out waiting for ${what}`);
  }
  const running = (url: string) => metric(url, 'vllm:num_requests_running');

  it.each(['prefill', 'decode'] as const)(
    'a client gone during the %s phase stops both engines',
    async (phase) => {
      // Engine time at speed 1: an 8k prefill takes ~0.8 s, long enough to leave during it.
      rig = await startRig(1);
      const { client, base, fleet } = rig;
      const history = text(2048, 'history');
      const decoding = await startDecoding(client, history, 'session-2');
      const pinned = (await Promise.all(fleet.urls.map(running))).findIndex((n) => n === 1);
      const other = fleet.urls[1 - pinned]!;
      const abort = new AbortController();
      const turn = client.completions.create(
        { model: MODEL, prompt: `${history}${text(8192, 'new')}`, max_tokens: 2000, stream: true, user: 'session-2' },
        { signal: abort.signal },
      );
      if (phase === 'prefill') {
        await until(async () => (await running(other)) === 1, 'the prefill on the idle engine');
        abort.abort();
        await expect(turn).rejects.toThrow();
      } else {
        const stream = await turn;
        const it = stream[Symbol.asyncIterator]();
        await it.next(); // the decode engine's first token
        abort.abort();
        // The SDK ends the iteration or throws, depending on where the abort lands; either is fine.
        await it.next().catch(() => undefined);
      }
      await decoding.controller.abort();
      await until(async () => (await running(fleet.urls[0]!)) + (await running(fleet.urls[1]!)) === 0, 'idle engines');
      await until(async () => rig!.proxy.router.stats().inFlight === 0, 'every ticket closed');
      // Leaving is not a failed prefill: no fallback is counted.
      expect(await metric(base, 'kvroute_offload_fallbacks_total')).toBe(0);
      // Left during the prefill: the decode request was never sent, so nothing was transferred.
      const transfers = await metric(fleet.urls[pinned]!, 'kvroute_sim_kv_transfers_total');
      expect(transfers).toBe(phase === 'prefill' ? 0 : 1);
    },
    30_000,
  );

  it('falls back to co-located serving when the prefill engine does not answer in time', async () => {
    // At speed 1 the 8k prefill takes ~0.8 s of engine time; the proxy waits 50 ms for it.
    rig = await startRig(1, { offloadPrefillTimeoutMs: 50 });
    const { client, base, fleet } = rig;
    const history = text(2048, 'history');
    const decoding = await startDecoding(client, history, 'session-3');
    const pinned = (await Promise.all(fleet.urls.map(running))).findIndex((n) => n === 1);
    const { data, response } = await client.completions
      .create({ model: MODEL, prompt: `${history}${text(8192, 'new')}`, max_tokens: 3, user: 'session-3' })
      .withResponse();
    await decoding.controller.abort();
    // The client still gets its answer, from the decode engine serving it whole.
    expect(data.choices[0]?.finish_reason).toBe('length');
    expect(response.headers.get('x-kvroute-instance')).toBe(fleet.urls[pinned]);
    expect(JSON.stringify(data)).not.toContain('kv_transfer_params');
    expect(await metric(base, 'kvroute_offloads_total')).toBe(0);
    expect(await metric(base, 'kvroute_offload_fallbacks_total')).toBe(1);
    const body = await (await fetch(`${base}/metrics`)).text();
    expect(body).toMatch(/kvroute_offload_fallbacks_total\{[^}]*cause="timeout"[^}]*\} 1/);
    // The abandoned prefill was stopped on its engine, and nothing was transferred.
    await until(async () => (await running(fleet.urls[0]!)) + (await running(fleet.urls[1]!)) === 0, 'idle engines');
    expect(await metric(fleet.urls[pinned]!, 'kvroute_sim_kv_transfers_total')).toBe(0);
    await until(async () => rig!.proxy.router.stats().inFlight === 0, 'every ticket closed');
  }, 30_000);
});
