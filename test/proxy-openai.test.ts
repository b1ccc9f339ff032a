/**
 * The proxy as an OpenAI endpoint: the official `openai` client through createProxy() to
 * simulated engines. Chat and completions, streaming and not, usage (with cached tokens) intact,
 * the x-kvroute-* headers, session affinity, /v1/models, /health, /ready, and 1,000 requests at
 * concurrency 64 with none lost and every ticket closed.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { MODEL, startFleetProxy, post, type ProxyRig } from './helpers/proxy-harness.js';
import type { SimFleet } from '../src/sim/sim-fleet.js';

let rig: ProxyRig & { fleet: SimFleet };
let serial = 0;
const fresh = (words = 200): string => `request ${++serial} ${Date.now()}: ${'lorem ipsum dolor '.repeat(words)}`;

beforeAll(async () => {
  rig = await startFleetProxy(4, { policy: 'unified' });
});
afterAll(() => rig?.close());

describe('proxy: the OpenAI API through the official client', () => {
  it('chat, non-streaming: the engine’s answer and usage, and where it went', async () => {
    const { data, response } = await rig.client.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: fresh() }], max_tokens: 5 })
      .withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.choices[0]!.message.content).toBe(' tok'.repeat(5));
    expect(data.usage).toMatchObject({ completion_tokens: 5, prompt_tokens_details: { cached_tokens: 0 } });
    expect(rig.fleet.urls).toContain(response.headers.get('x-kvroute-instance'));
    expect(response.headers.get('x-kvroute-reason')).toMatch(/^[a-z_]+$/);
    expect(response.headers.get('content-length')).not.toBeNull();
  });

  it('chat, streaming with include_usage: every chunk, the usage chunk and [DONE] intact', async () => {
    const stream = await rig.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: fresh() }],
      max_tokens: 6,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    expect(
      chunks
        .slice(1, -1)
        .map((c) => c.choices[0]!.delta.content)
        .join(''),
    ).toBe(' tok'.repeat(6));
    expect(chunks.at(-1)!.usage).toMatchObject({ completion_tokens: 6, prompt_tokens_details: { cached_tokens: 0 } });
  });

  it('completions, non-streaming and streaming', async () => {
    const text = await rig.client.completions.create({ model: MODEL, prompt: fresh(20), max_tokens: 3 });
    expect(text.choices[0]!.text).toBe(' tok tok tok');
    expect(text.usage?.completion_tokens).toBe(3);
    const stream = await rig.client.completions.create({
      model: MODEL,
      prompt: fresh(20),
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(
      chunks
        .filter((c) => c.choices.length > 0)
        .map((c) => c.choices[0]!.text)
        .join(''),
    ).toBe(' tok'.repeat(4));
    expect(chunks.at(-1)!.usage?.completion_tokens).toBe(4);
  });

  it('the raw SSE bytes end with the usage chunk and data: [DONE]', async () => {
    const response = await post(rig.base, '/v1/completions', {
      model: MODEL,
      prompt: fresh(5),
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await response.text();
    const events = text.split('\n\n').filter((e) => e !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    expect(JSON.parse(events.at(-2)!.slice(6)).usage.completion_tokens).toBe(2);
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
  });

  it('observers see routing, first byte and usage with cached tokens; a session sticks to its cache', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'user', content: fresh(300) }];
    const first = await rig.client.chat.completions
      .create({ model: MODEL, messages, max_tokens: 2 }, { headers: { 'x-session-id': `s-${serial}` } })
      .withResponse();
    messages.push({ role: 'assistant', content: first.data.choices[0]!.message.content });
    messages.push({ role: 'user', content: 'and then? '.repeat(30) });
    const second = await rig.client.chat.completions
      .create({ model: MODEL, messages, max_tokens: 2 }, { headers: { 'x-session-id': `s-${serial}` } })
      .withResponse();
    expect(second.response.headers.get('x-kvroute-instance')).toBe(first.response.headers.get('x-kvroute-instance'));
    const cached = second.data.usage!.prompt_tokens_details!.cached_tokens!;
    expect(cached).toBeGreaterThan(0);
    const finished = rig.observer.named('finished').at(-1)!;
    expect(finished[1]).toBe(second.response.headers.get('x-kvroute-instance'));
    expect(finished[2]).toBe(200);
    expect(finished[4]).toEqual({ prompt_tokens: second.data.usage!.prompt_tokens, cached_tokens: cached });
    const routed = rig.observer.named('routed').at(-1)!;
    expect(routed[3]).toBe('unified');
    expect(routed[4]).toBeGreaterThan(0);
    expect(rig.observer.named('firstByte').length).toBeGreaterThan(0);
  });

  it('streams report usage from the SSE usage chunk to observers', async () => {
    const before = rig.observer.named('finished').length;
    const stream = await rig.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: fresh(10) }],
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: true },
    });
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) usage = chunk.usage ?? usage;
    await rig.observer.until(() => rig.observer.named('finished').length > before);
    expect(rig.observer.named('finished').at(-1)![4]).toEqual({
      prompt_tokens: usage!.prompt_tokens,
      cached_tokens: 0,
    });
  });

  it('GET /v1/models merges the backends’ lists, one entry per id', async () => {
    const models = await rig.client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([MODEL]);
  });

  it('/health and /ready', async () => {
    expect((await fetch(`${rig.base}/health`)).status).toBe(200);
    const ready = await fetch(`${rig.base}/ready`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toEqual({ ready: true, models: { [MODEL]: 4 }, routable_backends: 4 });
  });

  it('1,000 requests at concurrency 64: none lost, every ticket closed', async () => {
    const total = 1_000;
    let next = 0;
    let ok = 0;
    let cleanErrors = 0;
    const lost: unknown[] = [];
    const worker = async (): Promise<void> => {
      while (next < total) {
        const i = next++;
        try {
          if (i % 2 === 0) {
            const r = await rig.client.chat.completions.create({
              model: MODEL,
              messages: [{ role: 'user', content: `conversation ${i % 37}: ${'x '.repeat(50 + (i % 200))}` }],
              max_tokens: 3,
            });
            if (r.choices[0]!.message.content === ' tok tok tok') ok++;
            else lost.push(r);
          } else {
            const stream = await rig.client.completions.create({
              model: MODEL,
              prompt: `prompt ${i % 53}: ${'y '.repeat(40 + (i % 150))}`,
              max_tokens: 3,
              stream: true,
            });
            let text = '';
            for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
            if (text === ' tok tok tok') ok++;
            else lost.push(text);
          }
        } catch (error) {
          if (error instanceof OpenAI.APIError && typeof error.status === 'number') cleanErrors++;
          else lost.push(error);
        }
      }
    };
    await Promise.all(Array.from({ length: 64 }, worker));
    expect(lost).toEqual([]);
    expect(ok + cleanErrors).toBe(total);
    expect(ok).toBe(total);
    expect(rig.proxy.router.stats().inFlight).toBe(0);
    expect(Object.values(rig.proxy.state.inFlight())).toEqual([0, 0, 0, 0]);
    expect(rig.proxy.router.checkInvariants()).toBe('');
  });
});
