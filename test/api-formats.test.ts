/**
 * The Anthropic Messages and OpenAI Responses APIs through the proxy, with the official SDKs as
 * clients (`@anthropic-ai/sdk`, `openai`'s `responses`) in front of `sim serve` engines that
 * tokenize and publish KV events:
 * - every answer, streamed or not, reaches the client byte for byte as the engine wrote it (a tee
 *   between the proxy and each engine records the engine's bytes);
 * - a second turn goes to the first turn's engine (the session from Claude Code's header, or the
 *   Responses API's prompt_cache_key) and the engine reports the first turn's tokens cached,
 *   which the proxy predicted exactly;
 * - the proxy's own errors come in each API's format; the usage it records counts cached tokens;
 *   a client that leaves mid-stream frees the engine.
 */
import { createConnection, createServer, type Server } from 'node:net';

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { TokenizerPool } from '../src/tokenize/tokenizer-pool.js';
import { MODEL, startProxy, type ProxyRig } from './helpers/proxy-harness.js';
import { poolTokenizer } from './helpers/pool-tokenizer.js';
import { waitFor } from './helpers/wait-for.js';

/** A TCP tee in front of one engine: records what the engine sends back, connection by connection. */
class EngineTee {
  server!: Server;
  recorded: Buffer[] = [];

  static async start(target: URL): Promise<EngineTee> {
    const tee = new EngineTee();
    tee.server = createServer((client) => {
      const engine = createConnection(Number(target.port), target.hostname);
      client.pipe(engine);
      engine.on('data', (chunk: Buffer) => tee.recorded.push(chunk));
      engine.pipe(client);
      client.on('error', () => engine.destroy());
      engine.on('error', () => client.destroy());
      client.on('close', () => engine.destroy());
    });
    await new Promise<void>((resolve) => tee.server.listen(0, '127.0.0.1', resolve));
    return tee;
  }

  get url(): string {
    const address = this.server.address() as { port: number };
    return `http://127.0.0.1:${address.port}`;
  }

  /** The body of the one response recorded since the last take (chunked coding removed). */
  take(): { headers: string; body: Buffer } {
    const raw = Buffer.concat(this.recorded);
    this.recorded = [];
    const split = raw.indexOf('\r\n\r\n');
    const headers = raw.subarray(0, split).toString('latin1').toLowerCase();
    let rest = raw.subarray(split + 4);
    if (!headers.includes('transfer-encoding: chunked')) return { headers, body: rest };
    const parts: Buffer[] = [];
    for (;;) {
      const line = rest.indexOf('\r\n');
      const size = parseInt(rest.subarray(0, line).toString('latin1'), 16);
      if (size === 0) break;
      parts.push(rest.subarray(line + 2, line + 2 + size));
      rest = rest.subarray(line + 2 + size + 2);
    }
    return { headers, body: Buffer.concat(parts) };
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

let fleet: SimFleet;
let pool: TokenizerPool;
let tees: EngineTee[];
let rig: ProxyRig;
/** The raw bytes of the last answer each SDK received. */
let clientBytes: Buffer = Buffer.alloc(0);

/** A fetch that keeps the answer's bytes (the SDKs read the copy). */
const recordingFetch: typeof fetch = async (input, init) => {
  const response = await fetch(input, init);
  clientBytes = Buffer.from(await response.arrayBuffer());
  return new Response(clientBytes, { status: response.status, headers: response.headers });
};

beforeAll(async () => {
  pool = await TokenizerPool.open({ tokenizers: { '*': 'qwen3' }, threads: 1 });
  const tokenizer = poolTokenizer(pool);
  fleet = await startSimFleet({ instances: 2, port: 0, speed: 50, kvEvents: { port: 0 }, tokenizer, model: MODEL });
  tees = await Promise.all(fleet.urls.map((url) => EngineTee.start(new URL(url))));
  rig = await startProxy({
    backends: tees.map((tee, k) => ({ url: tee.url, kvEvents: fleet.engines[k]!.kvEventPublisher!.endpoint })),
    tokenizers: { [MODEL]: 'qwen3' },
    // One connection per engine: each tee's recording is one response at a time.
    connections: 1,
  });
  await waitFor('the KV event subscriptions', () =>
    rig.proxy.router.stats().instances.every((i) => i.kvEvents?.fed === true),
  );
}, 60_000);
afterAll(async () => {
  await rig?.close();
  await Promise.all((tees ?? []).map((tee) => tee.close()));
  await fleet?.close();
  await pool?.close();
});

const anthropic = () => new Anthropic({ baseURL: rig.base, apiKey: 'test', fetch: recordingFetch, maxRetries: 0 });
const openai = () => new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'test', fetch: recordingFetch, maxRetries: 0 });

/** The engine's bytes for the answer the proxy routed to `instance` (a tee URL). */
function engineAnswer(instance: string): { headers: string; body: Buffer } {
  const tee = tees.find((t) => t.url === instance)!;
  return tee.take();
}

/** Waits until the proxy holds every KV event the engines published (the next turn's prediction reads them). */
async function eventsIn(): Promise<void> {
  await waitFor('the engines’ KV events at the proxy', () => {
    const stats = rig.proxy.router.stats().instances;
    return fleet.engines.every(
      (engine, k) =>
        (stats.find((i) => i.instance === tees[k]!.url)?.kvEvents?.messages ?? 0) >= engine.kvEventPublisher!.seq,
    );
  });
}

const history = (turn: number) =>
  `Turn ${turn}: ${'an agent reads a large repository and edits one file; '.repeat(30)}`;

describe('Messages and Responses through the proxy', () => {
  it('relays every answer byte for byte, streamed or not (Anthropic SDK, openai responses)', async () => {
    for (const tee of tees) tee.recorded = [];
    const cases: Array<[string, () => Promise<{ response: Response }>]> = [
      [
        'messages',
        () =>
          anthropic()
            .messages.create({
              model: MODEL,
              max_tokens: 6,
              system: 'be brief',
              messages: [{ role: 'user', content: 'hi' }],
            })
            .withResponse(),
      ],
      [
        'messages stream',
        async () => {
          const { data, response } = await anthropic()
            .messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], stream: true })
            .withResponse();
          const types: string[] = [];
          for await (const event of data) types.push(event.type);
          expect(types).toEqual([
            'message_start',
            'content_block_start',
            'content_block_delta',
            'content_block_delta',
            'content_block_delta',
            'content_block_delta',
            'content_block_stop',
            'message_delta',
            'message_stop',
          ]);
          return { response };
        },
      ],
      [
        'responses',
        () =>
          openai()
            .responses.create({ model: MODEL, input: 'hi', instructions: 'be brief', max_output_tokens: 5 })
            .withResponse(),
      ],
      [
        'responses stream',
        async () => {
          const { data, response } = await openai()
            .responses.create({ model: MODEL, input: 'hi', max_output_tokens: 3, stream: true })
            .withResponse();
          const types: string[] = [];
          for await (const event of data) types.push(event.type);
          expect(types.at(-1)).toBe('response.completed');
          expect(types.filter((t) => t === 'response.output_text.delta')).toHaveLength(3);
          return { response };
        },
      ],
    ];
    for (const [name, call] of cases) {
      const { response } = await call();
      const engine = engineAnswer(response.headers.get('x-kvroute-instance')!);
      expect(clientBytes.equals(engine.body), `${name}: the client's bytes are the engine's`).toBe(true);
      expect(engine.headers).toContain(`content-type: ${response.headers.get('content-type')}`);
    }
  });

  it("sends a Claude Code session's second turn to its first turn's engine, cached tokens predicted and reported", async () => {
    const messages: Anthropic.MessageParam[] = [];
    const turns: Array<{ instance: string; predicted: number; cached: number; input: number }> = [];
    for (let turn = 0; turn < 3; turn++) {
      messages.push({ role: 'user', content: history(turn) });
      const { data, response } = await anthropic()
        .messages.create(
          { model: MODEL, max_tokens: 8, system: 'You are a coding agent.', messages },
          { headers: { 'x-claude-code-session-id': 'claude-session-1' } },
        )
        .withResponse();
      messages.push({ role: 'assistant', content: data.content });
      turns.push({
        instance: response.headers.get('x-kvroute-instance')!,
        predicted: Number(response.headers.get('x-kvroute-predicted-cached-tokens')),
        cached: data.usage.cache_read_input_tokens ?? 0,
        input: data.usage.input_tokens,
      });
      expect(response.headers.get('x-kvroute-reason')).not.toMatch(/keys=text/);
      await eventsIn();
    }
    expect(new Set(turns.map((t) => t.instance)).size).toBe(1);
    expect(turns.slice(1).every((t) => t.cached > 0)).toBe(true);
    expect(turns.map((t) => t.predicted)).toEqual(turns.map((t) => t.cached));
  });

  it('does the same for a Responses conversation keyed by prompt_cache_key, streamed', async () => {
    const input: OpenAI.Responses.ResponseInputItem[] = [];
    const turns: Array<{ instance: string; predicted: number; cached: number }> = [];
    for (let turn = 0; turn < 3; turn++) {
      input.push({ role: 'user', content: [{ type: 'input_text', text: history(turn + 10) }] });
      const { data, response } = await openai()
        .responses.create({
          model: MODEL,
          input,
          instructions: 'You are a coding agent.',
          max_output_tokens: 6,
          prompt_cache_key: 'codex-conversation-7',
          stream: true,
          tools: [
            { type: 'function', name: 'read_file', parameters: { type: 'object', properties: {} }, strict: false },
          ],
        })
        .withResponse();
      let completed: OpenAI.Responses.Response | undefined;
      for await (const event of data) if (event.type === 'response.completed') completed = event.response;
      const message = completed!.output[0] as OpenAI.Responses.ResponseOutputMessage;
      const text = (message.content[0] as OpenAI.Responses.ResponseOutputText).text;
      input.push({ role: 'assistant', content: text });
      turns.push({
        instance: response.headers.get('x-kvroute-instance')!,
        predicted: Number(response.headers.get('x-kvroute-predicted-cached-tokens')),
        cached: completed!.usage!.input_tokens_details.cached_tokens,
      });
      await eventsIn();
    }
    expect(new Set(turns.map((t) => t.instance)).size).toBe(1);
    expect(turns.slice(1).every((t) => t.cached > 0)).toBe(true);
    expect(turns.map((t) => t.predicted)).toEqual(turns.map((t) => t.cached));
  });

  it("records usage with cached tokens from each API's usage shape", async () => {
    const before = rig.observer.named('finished').length;
    const long = [{ role: 'user' as const, content: history(99) }];
    await anthropic().messages.create(
      { model: MODEL, max_tokens: 2, messages: long },
      { headers: { 'x-session-id': 'u1' } },
    );
    await eventsIn();
    const second = await anthropic().messages.create(
      { model: MODEL, max_tokens: 2, messages: long, stream: true },
      { headers: { 'x-session-id': 'u1' } },
    );
    for await (const _ of second) void _;
    const finished = rig.observer.named('finished').slice(before);
    const usages = finished.map((e) => e[4] as { prompt_tokens: number; cached_tokens: number } | undefined);
    expect(usages[0]!.prompt_tokens).toBeGreaterThan(100);
    // Anthropic counts cache reads outside input_tokens: the proxy adds them back.
    expect(usages[1]!.prompt_tokens).toBe(usages[0]!.prompt_tokens);
    expect(usages[1]!.cached_tokens).toBeGreaterThan(0);
  });

  it("answers the proxy's own errors in each API's format", async () => {
    const a = await fetch(`${rig.base}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'no-such-model', max_tokens: 4, messages: [] }),
    });
    expect(a.status).toBe(404);
    expect(await a.json()).toEqual({
      type: 'error',
      error: { type: 'not_found_error', message: expect.stringMatching(/^model_not_found: /) },
    });
    for (const [body, field] of [
      [{ model: MODEL, messages: [] }, 'max_tokens'],
      [{ model: MODEL, max_tokens: 4 }, 'messages'],
      [{ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: 7 }] }, 'messages[0].content'],
    ] as const) {
      const r = await fetch(`${rig.base}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(r.status).toBe(400);
      const json = (await r.json()) as { type: string; error: { type: string; message: string } };
      expect(json.type).toBe('error');
      expect(json.error.type).toBe('invalid_request_error');
      expect(json.error.message).toContain(field);
    }
    const sdkError = await anthropic()
      .messages.create({ model: 'no-such-model', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e);
    expect(sdkError).toBeInstanceOf(Anthropic.NotFoundError);
    const r = await fetch(`${rig.base}/v1/responses`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL }),
    });
    expect(r.status).toBe(400);
    expect(await r.json()).toMatchObject({
      error: { type: 'invalid_request_error', code: 'missing_field', param: 'input' },
    });
    const notFound = await openai()
      .responses.create({ model: 'no-such-model', input: 'x' })
      .catch((e: unknown) => e);
    expect(notFound).toBeInstanceOf(OpenAI.NotFoundError);
    // The engine's own refusal on the Messages route is Anthropic's shape too (as vLLM's is).
    const direct = await fetch(`${fleet.urls[0]}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x' }] }),
    });
    expect(direct.status).toBe(400);
    expect(await direct.json()).toEqual({
      type: 'error',
      error: { type: 'invalid_request_error', message: 'max_tokens: Field required' },
    });
  });

  it('frees the engine when a streaming client leaves', async () => {
    const controller = new AbortController();
    // Not the recording fetch: it would wait for the whole answer.
    const client = new Anthropic({ baseURL: rig.base, apiKey: 'test', maxRetries: 0 });
    const stream = await client.messages.create(
      { model: MODEL, max_tokens: 5000, messages: [{ role: 'user', content: 'write a lot' }], stream: true },
      { signal: controller.signal },
    );
    let seen = 0;
    try {
      for await (const event of stream) if (event.type === 'content_block_delta' && ++seen === 3) controller.abort();
    } catch (error) {
      expect((error as Error).name).toMatch(/Abort/);
    }
    expect(seen).toBeLessThan(5000); // events already buffered may still arrive
    await waitFor('the engines to have nothing running', () =>
      fleet.engines.every((engine) => engine.engine.state().running === 0),
    );
  });
});
