/**
 * `kvroute sim serve`: simulated vLLM engines over HTTP, on loopback ephemeral ports, driven by
 * the official `openai` client. Covers the OpenAI contract (chat and completions, streaming and
 * not, usage with cached tokens), prefix caching by prompt text and by `hash_ids`, pacing under
 * `--speed`, client aborts, `/metrics`, `/v1/models`, `/health`, bad input, and the CLI verb.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

import { simServeVerb } from '../src/cli/sim-serve-verb.js';
import { UsageError } from '../src/cli/common.js';
import { ENGINE_PRESETS, stepMs } from '../src/sim/engine-preset.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';

const MODEL = 'qwen3-coder-30b-a3b';
const preset = ENGINE_PRESETS['h20-qwen3-coder-30b-a3b']!;
let fleet: SimFleet;
let client: OpenAI;
let url: string;
let serial = 0;

beforeAll(async () => {
  fleet = await startSimFleet({ instances: 2, port: 0, speed: 100, maxBodyBytes: 2 << 20 });
  url = fleet.urls[0]!;
  client = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
afterAll(() => fleet?.close());

/** A prompt no other test sends, so caching starts cold. */
const fresh = (words = 400): string => `request ${++serial} ${Date.now()}: ${'lorem ipsum dolor '.repeat(words)}`;

/** Extension fields the SDK's types do not know; it sends the body's keys as given. */
type Extended<T> = T & { hash_ids?: number[]; input_tokens?: number };

/** `name{labels} value` lines of a Prometheus text exposition. */
function parseExposition(text: string): Array<{ name: string; labels: Record<string, string>; value: number }> {
  const samples = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (match === null) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of match[2]?.matchAll(/([a-zA-Z_]\w*)="((?:[^"\\]|\\.)*)"/g) ?? []) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

async function scrape(base = url): Promise<(name: string, labels?: Record<string, string>) => number> {
  const response = await fetch(`${base}/metrics`);
  expect(response.status).toBe(200);
  const samples = parseExposition(await response.text());
  return (name, labels = {}) => {
    const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    expect(found, name).toHaveLength(1);
    return found[0]!.value;
  };
}

describe('sim serve: the OpenAI API', () => {
  it('chat, non-streaming: one choice of max_tokens tokens, finish_reason length, usage', async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: fresh() }],
      max_tokens: 7,
    });
    expect(completion.object).toBe('chat.completion');
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.model).toBe(MODEL);
    expect(completion.choices).toHaveLength(1);
    expect(completion.choices[0]!.message).toMatchObject({ role: 'assistant', content: ' tok'.repeat(7) });
    expect(completion.choices[0]!.finish_reason).toBe('length');
    const usage = completion.usage!;
    expect(usage.completion_tokens).toBe(7);
    expect(usage.prompt_tokens).toBeGreaterThan(1000);
    expect(usage.total_tokens).toBe(usage.prompt_tokens + 7);
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(0);
  });

  it('chat, streaming with include_usage: role chunk, one chunk per token, a usage chunk, [DONE]', async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: fresh() }],
      max_completion_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: OpenAI.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0]!.id)).toBe(true);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: 'assistant', content: '' });
    const content = chunks.slice(1, -1);
    expect(content.map((c) => c.choices[0]!.delta.content).join('')).toBe(' tok'.repeat(5));
    expect(content.map((c) => c.choices[0]!.finish_reason)).toEqual([null, null, null, null, 'length']);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: 5, prompt_tokens_details: { cached_tokens: 0 } });
  });

  it('completions, non-streaming and streaming (text and token-id prompts)', async () => {
    const text = await client.completions.create({ model: MODEL, prompt: fresh(10), max_tokens: 3 });
    expect(text.object).toBe('text_completion');
    expect(text.id).toMatch(/^cmpl-/);
    expect(text.choices[0]).toMatchObject({ text: ' tok tok tok', finish_reason: 'length' });
    expect(text.usage).toMatchObject({ completion_tokens: 3 });

    const ids = Array.from({ length: 100 }, (_, i) => 1000 + i);
    const tokens = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 1 });
    expect(tokens.usage?.prompt_tokens).toBe(100);

    const stream = await client.completions.create({ model: MODEL, prompt: fresh(10), max_tokens: 4, stream: true });
    const chunks: OpenAI.Completion[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks.map((c) => c.choices[0]!.text).join('')).toBe(' tok'.repeat(4));
    expect(chunks.every((c) => c.object === 'text_completion' && c.usage === undefined)).toBe(true);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe('length');
  });

  it('defaults the output length: 16 for completions, 256 for chat', async () => {
    const text = await client.completions.create({ model: MODEL, prompt: fresh(5) });
    expect(text.usage?.completion_tokens).toBe(16);
    const chat = await client.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
    expect(chat.usage?.completion_tokens).toBe(256);
  });

  it('caches prompt prefixes by the router’s text hashing: the next turn of a conversation hits', async () => {
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: 'system', content: fresh(200) },
      { role: 'user', content: 'first question '.repeat(50) },
    ];
    const first = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
    expect(first.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    messages.push({ role: 'assistant', content: first.choices[0]!.message.content });
    messages.push({ role: 'user', content: 'second question '.repeat(50) });
    const second = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 2 });
    const cached = second.usage!.prompt_tokens_details!.cached_tokens!;
    expect(cached % 16).toBe(0);
    expect(cached).toBeGreaterThan(first.usage!.prompt_tokens - 16 * 2);
    expect(cached).toBeLessThanOrEqual(first.usage!.prompt_tokens);

    // Another engine has its own cache.
    const other = new OpenAI({ baseURL: `${fleet.urls[1]}/v1`, apiKey: 'unused', maxRetries: 0 });
    const cold = await other.chat.completions.create({ model: MODEL, messages, max_tokens: 1 });
    expect(cold.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
  });

  it('caches by the hash_ids extension field, one id per 16-token block', async () => {
    const base = 1_000_000 * ++serial;
    const ids = (n: number) => Array.from({ length: n }, (_, i) => base + i);
    const first: Extended<OpenAI.CompletionCreateParamsNonStreaming> = {
      model: MODEL,
      prompt: 'ignored for caching',
      max_tokens: 1,
      hash_ids: ids(10),
    };
    const a = await client.completions.create(first);
    expect(a.usage).toMatchObject({ prompt_tokens: 160, prompt_tokens_details: { cached_tokens: 0 } });
    const second: Extended<OpenAI.CompletionCreateParamsNonStreaming> = {
      model: MODEL,
      prompt: 'other text, same blocks',
      max_tokens: 1,
      hash_ids: ids(12),
      input_tokens: 190,
    };
    const b = await client.completions.create(second);
    expect(b.usage).toMatchObject({ prompt_tokens: 190, prompt_tokens_details: { cached_tokens: 160 } });
  });

  it('streams at the model’s pace divided by --speed', async () => {
    const slow = await startSimFleet({ instances: 1, port: 0, speed: 10 });
    try {
      const paced = new OpenAI({ baseURL: `${slow.urls[0]}/v1`, apiKey: 'unused', maxRetries: 0 });
      const params: Extended<OpenAI.CompletionCreateParamsStreaming> = {
        model: MODEL,
        prompt: 'x',
        hash_ids: [],
        input_tokens: 8192,
        max_tokens: 64,
        stream: true,
      };
      const started = performance.now();
      let firstAt = 0;
      let count = 0;
      for await (const chunk of await paced.completions.create(params)) {
        if (count++ === 0) firstAt = performance.now() - started;
        expect(chunk.choices[0]!.text).toBe(' tok');
      }
      const total = performance.now() - started;
      expect(count).toBe(64);
      // Lower bounds only (a loaded machine is slower, never faster): the prefill step, then 63 decodes.
      const prefillMs = stepMs(preset, [{ tokens: 8192, context: 0 }], 0);
      const decodeMs = stepMs(preset, [], 1, 8192);
      expect(firstAt).toBeGreaterThanOrEqual((0.9 * prefillMs) / 10);
      expect(total).toBeGreaterThanOrEqual((0.9 * (prefillMs + 63 * decodeMs)) / 10);
    } finally {
      await slow.close();
    }
  });
});

describe('sim serve: client aborts', () => {
  it('a stream aborted mid-way stops inside the engine: running drops to 0, no more tokens', async () => {
    const server = fleet.engines[1]!;
    const engineClient = new OpenAI({ baseURL: `${fleet.urls[1]}/v1`, apiKey: 'unused', maxRetries: 0 });
    const stream = await engineClient.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: fresh() }],
      max_tokens: 100_000, // ~11 min of model time: minutes of wall time even at speed 100
      stream: true,
    });
    let received = 0;
    for await (const _chunk of stream) if (++received === 5) break; // leaving the loop aborts the request
    expect(received).toBe(5);
    await vi.waitFor(() => expect(server.realtime.liveRequests).toBe(0));
    expect(server.engine.idle).toBe(true); // an idle engine runs no step: no token can follow
    expect(server.engine.pool.referenced).toBe(0);
    const metric = await scrape(fleet.urls[1]);
    expect(metric('vllm:num_requests_running')).toBe(0);
    expect(metric('vllm:num_requests_waiting')).toBe(0);
    expect(metric('vllm:kv_cache_usage_perc')).toBe(0);
  });

  it('a non-streaming request dropped before its first token is aborted too', async () => {
    const server = fleet.engines[1]!;
    const controller = new AbortController();
    const pending = fetch(`${fleet.urls[1]}/v1/completions`, {
      method: 'POST',
      body: JSON.stringify({ prompt: 'x', hash_ids: [], input_tokens: 100_000, max_tokens: 10 }),
      signal: controller.signal,
    });
    await vi.waitFor(() => expect(server.engine.state().running + server.engine.state().waiting).toBe(1));
    const during = await scrape(fleet.urls[1]);
    expect(during('vllm:num_requests_running')).toBe(1);
    expect(during('vllm:kv_cache_usage_perc')).toBeGreaterThan(0);
    controller.abort();
    await expect(pending).rejects.toThrow();
    await vi.waitFor(() => expect(server.engine.idle).toBe(true));
    expect(server.realtime.liveRequests).toBe(0);
    expect((await scrape(fleet.urls[1]))('vllm:num_requests_running')).toBe(0);
  });
});

describe('sim serve: /metrics, /v1/models, /health', () => {
  it('exposes vLLM’s metric names with model_name and engine labels, and they move', async () => {
    const labels = { model_name: MODEL, engine: '0' };
    const before = await scrape();
    const prompt = fresh(300);
    let promptTokens = 0;
    for (let i = 0; i < 2; i++) {
      const c = await client.completions.create({ model: MODEL, prompt, max_tokens: 4 });
      promptTokens = c.usage!.prompt_tokens;
    }
    const after = await scrape();
    const delta = (name: string, extra: Record<string, string> = {}) =>
      after(name, { ...labels, ...extra }) - before(name, { ...labels, ...extra });
    expect(delta('vllm:prefix_cache_queries_total')).toBe(2 * promptTokens);
    expect(delta('vllm:prefix_cache_hits_total')).toBe(Math.floor((promptTokens - 1) / 16) * 16);
    expect(delta('vllm:prompt_tokens_total')).toBe(2 * promptTokens);
    expect(delta('vllm:generation_tokens_total')).toBe(8);
    expect(delta('vllm:request_success_total', { finished_reason: 'length' })).toBe(2);
    expect(delta('vllm:num_preemptions_total')).toBe(0);
    expect(delta('vllm:time_to_first_token_seconds_count')).toBe(2);
    expect(delta('vllm:inter_token_latency_seconds_count')).toBe(6);
    expect(delta('vllm:e2e_request_latency_seconds_count')).toBe(2);
    expect(delta('vllm:e2e_request_latency_seconds_bucket', { le: '+Inf' })).toBe(2);
    expect(delta('vllm:time_to_first_token_seconds_sum')).toBeGreaterThan(0);
    for (const gauge of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc'])
      expect(after(gauge, labels)).toBe(0);
  });

  it('lists the served model with its max_model_len, and answers /health', async () => {
    const models = await client.models.list();
    expect(models.data).toHaveLength(1);
    expect(models.data[0]).toMatchObject({ id: MODEL, object: 'model', owned_by: 'kvroute-sim' });
    expect((models.data[0] as unknown as { max_model_len: number }).max_model_len).toBe(preset.maxModelLen);
    const health = await fetch(`${url}/health`);
    expect(health.status).toBe(200);
    expect(await health.text()).toBe('');
  });
});

describe('sim serve: bad input', () => {
  const chat = '/v1/chat/completions';
  const completions = '/v1/completions';
  const big = preset.maxModelLen;
  it.each([
    [chat, '{"messages": [', 400, 'not valid JSON'],
    [chat, '[]', 400, 'the request body must be an object'],
    [chat, '{"model": "qwen3-coder-30b-a3b"}', 400, 'messages is required'],
    [chat, '{"messages": "hi"}', 400, 'messages must be an array of messages'],
    [chat, '{"messages": []}', 400, 'messages must be a non-empty array'],
    [chat, '{"messages": [{"content": "hi"}]}', 400, 'messages[0].role must be a string'],
    [chat, '{"messages": [{"role": "user", "content": 3}]}', 400, 'messages[0].content must be'],
    [chat, '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": "9"}', 400, 'max_tokens must be a number'],
    [
      chat,
      '{"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 0}',
      400,
      'max_completion_tokens',
    ],
    [chat, '{"messages": [{"role": "user", "content": "hi"}], "stream": "yes"}', 400, 'stream must be a boolean'],
    [chat, '{"messages": [{"role": "user", "content": "hi"}], "stream_options": {}}', 400, 'stream_options'],
    [chat, '{"messages": [{"role": "user", "content": "hi"}], "n": 2}', 400, 'n must be 1'],
    [
      chat,
      '{"messages": [{"role": "user", "content": "hi"}], "model": "gpt-4o"}',
      404,
      'The model `gpt-4o` does not exist.',
    ],
    [completions, '{"max_tokens": 3}', 400, 'prompt is required'],
    [completions, '{"prompt": 42}', 400, 'prompt must be a string'],
    [completions, '{"prompt": ["a", "b"]}', 400, 'prompt must be a single prompt'],
    [completions, '{"prompt": [1, -2]}', 400, 'prompt[1] must be a token id'],
    [completions, '{"prompt": "x", "hash_ids": "1,2"}', 400, 'hash_ids must be an array of integers'],
    [completions, '{"prompt": "x", "hash_ids": [1, 2.5]}', 400, 'hash_ids[1] must be an integer'],
    [completions, '{"prompt": "x", "hash_ids": []}', 400, 'hash_ids must not be empty'],
    [completions, '{"prompt": "x", "input_tokens": "many"}', 400, 'input_tokens must be a number'],
    [completions, `{"prompt": "x", "input_tokens": ${big}}`, 400, `maximum context length is ${big} tokens`],
    [completions, `{"prompt": "${'abcd'.repeat(big)}"}`, 400, `your request has ${big} input tokens`],
    [completions, `{"prompt": "x", "max_tokens": ${big}}`, 400, "'max_tokens' or 'max_completion_tokens' is too large"],
  ])('POST %s %s → %i naming the problem', async (path, body, status, message) => {
    const response = await fetch(`${url}${path}`, { method: 'POST', body });
    expect(response.status).toBe(status);
    expect(response.headers.get('content-type')).toBe('application/json');
    const error = (await response.json()) as { error: { message: string; type: string; param: null; code: number } };
    expect(error.error.message).toContain(message);
    expect(error.error).toMatchObject({ param: null, code: status });
  });

  it('answers unknown routes 404, wrong methods 405 and oversized bodies 413', async () => {
    expect((await fetch(`${url}/v2/things`)).status).toBe(404);
    const wrong = await fetch(`${url}/v1/chat/completions`);
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('POST');
    expect((await fetch(`${url}/metrics`, { method: 'POST', body: '{}' })).status).toBe(405);
    const huge = JSON.stringify({ prompt: 'x'.repeat((2 << 20) + 10) });
    const tooLarge = await fetch(`${url}/v1/completions`, { method: 'POST', body: huge });
    expect(tooLarge.status).toBe(413);
    expect(((await tooLarge.json()) as { error: { message: string } }).error.message).toContain('exceeds');
  });

  it('reaches the openai client as its typed errors, and the server keeps serving', async () => {
    await expect(client.chat.completions.create({ model: MODEL, messages: [] })).rejects.toBeInstanceOf(
      OpenAI.BadRequestError,
    );
    await expect(
      client.chat.completions.create({ model: 'other', messages: [{ role: 'user', content: 'x' }] }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const ok = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'x' }],
      max_tokens: 1,
    });
    expect(ok.choices[0]!.message.content).toBe(' tok');
  });
});

describe('kvroute sim serve', () => {
  it('refuses bad flags with usage errors', async () => {
    await expect(simServeVerb({ speed: '0' })).rejects.toThrow('--speed must be a positive number, got 0');
    await expect(simServeVerb({ instances: '0' })).rejects.toThrow('--instances must be a positive integer');
    await expect(simServeVerb({ preset: 'a100' })).rejects.toThrow('--preset must be one of');
    await expect(simServeVerb({ port: '65535', instances: '2' })).rejects.toThrow(UsageError);
    const taken = new URL(url).port;
    await expect(simServeVerb({ port: taken, instances: '1' })).rejects.toThrow('cannot listen');
  });

  it('prints one URL per engine, serves, and exits cleanly on SIGTERM', async () => {
    const module = fileURLToPath(new URL('../dist/cli/sim-serve-verb.js', import.meta.url));
    const child = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { simServeVerb } = await import(${JSON.stringify(module)}); await simServeVerb(JSON.parse(process.env.ARGS));`,
      ],
      {
        env: { ...process.env, ARGS: JSON.stringify({ instances: '2', port: '0', speed: '50' }) },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const urls = await new Promise<string[]>((resolve, reject) => {
        let stdout = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
          stdout += chunk;
          const lines = stdout.split('\n');
          if (lines.length > 2) resolve(lines.slice(0, -1));
        });
        child.once('exit', (code) => reject(new Error(`sim serve exited early (${code}): ${stderr}`)));
      });
      expect(stderr).toContain('2 engines');
      expect(urls).toHaveLength(2);
      for (const engineUrl of urls) {
        expect(engineUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
        expect((await fetch(`${engineUrl}/health`)).status).toBe(200);
      }
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      expect(await exited).toEqual([0, null]);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
