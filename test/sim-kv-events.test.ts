/**
 * `sim serve` speaks vLLM KV cache events, over real ZeroMQ sockets on loopback: kvroute's own
 * subscriber receives the BlockStored events of a token-id prompt (its blocks, tokens and
 * parents), an eviction publishes BlockRemoved, a prefix-cache reset AllBlocksCleared, both
 * encodings decode, the replay socket answers vLLM's request with the buffered range and the −1
 * end marker, and a repeated prompt reports vLLM's cached_tokens. Every wait is bounded.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Dealer, Publisher } from 'zeromq';

import { UsageError } from '../src/cli/common.js';
import { simServeVerb } from '../src/cli/sim-serve-verb.js';
import { decodeKvEventBatch, type KvEvent, type KvEventMessage } from '../src/events/kv-event-batch.js';
import { KvEventSubscriber } from '../src/events/kv-event-subscriber.js';
import { tokenBlockIds } from '../src/sim/completion-request.js';
import { derivedBlockTokens } from '../src/sim/derived-tokens.js';
import { capacityBlocks, ENGINE_PRESETS } from '../src/sim/engine-preset.js';
import { KV_EVENT_ENCODINGS, seqFrame } from '../src/sim/kv-event-encoding.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';

const BS = 16;
const CAPACITY = 40; // blocks: a few prompts evict
const preset = ENGINE_PRESETS['h20-qwen3-coder-30b-a3b']!;
const u64 = (id: number): bigint => BigInt.asUintN(64, BigInt(id));

/** Polls `done` every 10 ms for at most `ms`. */
async function until(done: () => boolean, ms = 5000): Promise<void> {
  for (const end = Date.now() + ms; !done();) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe.each(KV_EVENT_ENCODINGS)('sim serve --kv-events (%s encoding)', (encoding) => {
  let fleet: SimFleet;
  let subscriber: KvEventSubscriber;
  const received: KvEventMessage[] = [];
  let serial = encoding === 'map' ? 1 : 100_000;

  const events = (): KvEvent[] => received.flatMap((m) => m.batch.events);
  const stored = (): Array<Extract<KvEvent, { type: 'stored' }>> =>
    events().filter((e): e is Extract<KvEvent, { type: 'stored' }> => e.type === 'stored');
  const storedHashes = (): Set<bigint> => new Set(stored().flatMap((e) => e.blockHashes));

  /** `n` token ids no other request uses. */
  const freshTokens = (n: number): number[] => Array.from({ length: n }, (_, i) => (serial++ * 131 + i) % 150_000);

  async function complete(body: object): Promise<{ cached: number; prompt: number }> {
    const response = await fetch(`${fleet.urls[0]}/v1/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ max_tokens: 1, ...body }),
    });
    const json = (await response.json()) as {
      usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    };
    expect(response.status, JSON.stringify(json)).toBe(200);
    return { cached: json.usage.prompt_tokens_details.cached_tokens, prompt: json.usage.prompt_tokens };
  }

  beforeAll(async () => {
    fleet = await startSimFleet({
      instances: 1,
      port: 0,
      speed: 100,
      blockSize: BS,
      scaling: { kvCapacity: (CAPACITY + 0.5) / capacityBlocks(preset, BS) },
      kvEvents: { port: 0, replayPort: 0, encoding },
    });
    expect(fleet.engines[0]!.engine.pool.capacity).toBe(CAPACITY);
    subscriber = new KvEventSubscriber(fleet.engines[0]!.kvEventPublisher!.endpoint, (message) =>
      received.push(message),
    );
    await subscriber.start();
    // A SUB socket misses what is published before its subscription lands: send throwaway
    // prompts until one's events arrive (bounded).
    for (let k = 0; k < 50 && received.length === 0; k++) {
      await complete({ prompt: freshTokens(BS) });
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(received.length).toBeGreaterThan(0);
  });
  afterAll(async () => {
    await subscriber?.close();
    await fleet?.close();
  });

  it('publishes a token-id prompt’s full blocks: hashes, token_ids, parents; cached_tokens by vLLM’s rule', async () => {
    const prompt = freshTokens(100); // 6 full blocks and 4 tokens
    const ids = tokenBlockIds(Uint32Array.from(prompt), BS);
    expect(ids).toHaveLength(6);
    expect(await complete({ prompt })).toEqual({ cached: 0, prompt: 100 });
    await until(() => ids.every((id) => storedHashes().has(u64(id))));
    const ours = stored().filter((e) => e.blockHashes.some((h) => ids.map(u64).includes(h)));
    expect(ours.flatMap((e) => e.blockHashes)).toEqual(ids.map(u64));
    expect(ours.flatMap((e) => e.tokenIds)).toEqual(prompt.slice(0, 96));
    expect(ours[0]!.parentBlockHash).toBeNull();
    for (const event of ours) {
      expect(event).toMatchObject({ blockSize: BS, loraId: null, medium: 'GPU' });
      const first = ids.map(u64).indexOf(event.blockHashes[0]!);
      if (first > 0) expect(event.parentBlockHash).toBe(u64(ids[first - 1]!));
    }
    // The same prompt again hits its 6 full blocks: 96 tokens, and at most (100 − 1) ÷ 16 blocks.
    expect(await complete({ prompt })).toEqual({ cached: 96, prompt: 100 });
    // A prompt of exactly 6 blocks recomputes its last block: 5 × 16 cached (vLLM).
    expect(await complete({ prompt: prompt.slice(0, 96) })).toEqual({ cached: 80, prompt: 96 });
  });

  it('publishes hash_ids blocks with token ids derived from each id', async () => {
    const hashIds = [serial * 1000 + 1, serial * 1000 + 2, -(serial * 1000 + 3)];
    serial++;
    await complete({ prompt: 'x', hash_ids: hashIds, input_tokens: 3 * BS + 5 });
    await until(() => hashIds.every((id) => storedHashes().has(u64(id))));
    const event = stored().find((e) => e.blockHashes[0] === u64(hashIds[0]!))!;
    expect(event.blockHashes).toEqual(hashIds.map(u64));
    expect(event.parentBlockHash).toBeNull();
    expect(event.tokenIds).toEqual(hashIds.flatMap((id) => derivedBlockTokens(id, BS)));
  });

  it('publishes BlockRemoved for evicted blocks, and AllBlocksCleared on POST /reset_prefix_cache', async () => {
    const first = freshTokens(3 * BS + 1);
    const firstIds = tokenBlockIds(Uint32Array.from(first), BS).map(u64);
    await complete({ prompt: first });
    // Fill the 40-block pool with other prompts: the oldest cached blocks go first.
    for (let k = 0; k < 8; k++) await complete({ prompt: freshTokens(6 * BS + 1) });
    const removed = (): Set<bigint> => new Set(events().flatMap((e) => (e.type === 'removed' ? e.blockHashes : [])));
    await until(() => firstIds.every((h) => removed().has(h)));
    expect(await complete({ prompt: first })).toMatchObject({ cached: 0 });

    const response = await fetch(`${fleet.urls[0]}/reset_prefix_cache`, { method: 'POST' });
    expect(response.status).toBe(200);
    await until(() => events().some((e) => e.type === 'cleared'));
    expect(fleet.engines[0]!.engine.pool.cached).toBe(0);
  });

  it('replays the buffered range on vLLM’s request, ending with seq −1; ignores a malformed request', async () => {
    const publisher = fleet.engines[0]!.kvEventPublisher!;
    await until(() => received.length > 0 && received.at(-1)!.seq === BigInt(publisher.seq - 1));
    const dealer = new Dealer({ linger: 0, receiveTimeout: 3000 });
    try {
      dealer.connect(publisher.replayEndpoint!);
      // Not (empty, seq): vLLM ignores it, answering nothing; counted.
      await dealer.send([seqFrame(0)]);
      const from = 2;
      await dealer.send([Buffer.alloc(0), seqFrame(from)]);
      const replayed: Array<{ seq: bigint; payload: Buffer }> = [];
      for (let k = 0; k < 10_000; k++) {
        const frames = await dealer.receive();
        expect(frames).toHaveLength(3);
        expect(frames[0]!.length).toBe(0);
        const seq = frames[1]!.readBigInt64BE(0);
        if (seq === -1n) {
          expect(frames[2]!.length).toBe(0);
          break;
        }
        replayed.push({ seq, payload: frames[2]! });
      }
      expect(replayed.map((r) => r.seq)).toEqual(
        Array.from({ length: publisher.seq - from }, (_, i) => BigInt(from + i)),
      );
      // The same bytes as were published: each equals what the subscriber decoded for that seq.
      for (const { seq, payload } of replayed) {
        const live = received.find((m) => m.seq === seq);
        if (live !== undefined) expect(decodeKvEventBatch(payload).events).toEqual(live.batch.events);
      }
      expect(publisher.counts.badReplayRequests).toBe(1);
      expect(publisher.counts.replayRequests).toBe(1);
    } finally {
      dealer.close();
    }
    expect(subscriber.counts.malformed).toBe(0);
    expect(subscriber.seq.counts.gaps).toBeLessThanOrEqual(1); // only the join (a gap from 0)
  });
});

describe('kvroute sim serve --kv-events flags', () => {
  it('refuses bad values with usage errors naming the flag', async () => {
    await expect(simServeVerb({ 'kv-events': 'x' })).rejects.toThrow('--kv-events must be');
    await expect(simServeVerb({ 'kv-events': '-1' })).rejects.toThrow('--kv-events must be');
    await expect(simServeVerb({ 'kv-events': '65535', instances: '2' })).rejects.toThrow(
      '--kv-events 65535 leaves no room for 2 engines',
    );
    await expect(simServeVerb({ 'kv-events': '0', 'kv-events-replay': '65535', instances: '2' })).rejects.toThrow(
      '--kv-events-replay 65535 leaves no room',
    );
    await expect(simServeVerb({ 'kv-events': '0', 'kv-events-encoding': 'json' })).rejects.toThrow(
      '--kv-events-encoding must be one of array, map, got json',
    );
    await expect(simServeVerb({ 'kv-events-encoding': 'array' })).rejects.toThrow(
      '--kv-events-encoding needs --kv-events PORT',
    );
    await expect(simServeVerb({ 'kv-events-replay': '0' })).rejects.toThrow(
      '--kv-events-replay needs --kv-events PORT',
    );
    for (const bad of [{ 'kv-events': 'x' }, { 'kv-events-replay': '0' }])
      await expect(simServeVerb(bad)).rejects.toThrow(UsageError);
  });

  it('refuses a taken event port as a usage error, leaving nothing open', async () => {
    const taken = new Publisher();
    try {
      await taken.bind('tcp://127.0.0.1:*');
      const port = new URL(taken.lastEndpoint!.replace('tcp:', 'http:')).port;
      await expect(simServeVerb({ instances: '1', port: '0', 'kv-events': port })).rejects.toThrow(
        /cannot listen: .*Address already in use/,
      );
    } finally {
      taken.close();
    }
  });

  it('prints each engine’s event and replay endpoints on stderr', async () => {
    const stderr: string[] = [];
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const spy = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      stderr.push(String(chunk));
      return true;
    });
    const stop = new AbortController();
    let running: Promise<void> | undefined;
    try {
      running = simServeVerb(
        {
          instances: '2',
          port: '0',
          'kv-events': '0',
          'kv-events-replay': '0',
          'kv-events-encoding': 'array',
        },
        { signal: stop.signal },
      );
      await until(() => stderr.filter((line) => line.includes('kv events')).length === 2);
    } finally {
      stop.abort();
      await running;
      spy.mockRestore();
      stdout.mockRestore();
    }
    const lines = stderr.filter((line) => line.includes('kv events'));
    for (const [i, line] of lines.entries())
      expect(line).toMatch(
        new RegExp(
          `^kvroute sim serve: engine ${i} kv events tcp://127\\.0\\.0\\.1:\\d+ \\(array\\) · replay tcp://127\\.0\\.0\\.1:\\d+\\n$`,
        ),
      );
  });
});

describe('sim serve with a tokenizer (the PromptTokenizer interface)', () => {
  // A stand-in for src/tokenize: each UTF-8 byte of the text, or of the messages' JSON, is a token.
  const bytes = (text: string): Uint32Array => Uint32Array.from(Buffer.from(text, 'utf8'));
  let fleet: SimFleet;
  let subscriber: KvEventSubscriber;
  const received: KvEventMessage[] = [];

  beforeAll(async () => {
    fleet = await startSimFleet({
      instances: 1,
      port: 0,
      speed: 100,
      blockSize: BS,
      kvEvents: { port: 0, encoding: 'map' },
      tokenizer: async (input) => {
        const text = input.kind === 'text' ? input.text : JSON.stringify(input.messages);
        if (text.includes('untokenizable')) throw new Error('no template for this');
        return bytes(text);
      },
    });
    subscriber = new KvEventSubscriber(fleet.engines[0]!.kvEventPublisher!.endpoint, (m) => received.push(m));
    await subscriber.start();
  });
  afterAll(async () => {
    await subscriber?.close();
    await fleet?.close();
  });

  /** The fields of a completion or error body the tests read. */
  interface Answer {
    usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    error: { message: string };
  }

  async function post(path: string, body: object): Promise<{ status: number; json: Answer }> {
    const response = await fetch(`${fleet.urls[0]}${path}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ max_tokens: 1, ...body }),
    });
    return { status: response.status, json: (await response.json()) as Answer };
  }

  it('caches chat and text prompts by the tokenizer’s token blocks and publishes those tokens', async () => {
    const messages = [{ role: 'user', content: `tokenized chat ${Date.now()} ${'abc '.repeat(20)}` }];
    const tokens = bytes(JSON.stringify(messages));
    const full = Math.floor(tokens.length / BS);
    const first = await post('/v1/chat/completions', { messages });
    expect(first.status).toBe(200);
    expect(first.json.usage.prompt_tokens).toBe(tokens.length);
    const again = await post('/v1/chat/completions', { messages });
    expect(again.json.usage.prompt_tokens_details.cached_tokens).toBe(Math.floor((tokens.length - 1) / BS) * BS);
    const ids = tokenBlockIds(tokens, BS).map(u64);
    expect(ids).toHaveLength(full);
    // Published with exactly the tokenizer's tokens (the subscriber may have joined late: keep
    // sending a fresh text prompt until the chat blocks' events, or a later batch, arrive).
    for (let k = 0; k < 50 && !received.some((m) => m.batch.events.length > 0); k++)
      await post('/v1/completions', { prompt: `warm-up ${k} ${'x'.repeat(40)}` });
    const text = `text prompt ${Date.now()} ${'lorem ipsum '.repeat(10)}`;
    await post('/v1/completions', { prompt: text, hash_ids: [1, 2, 3] }); // tokens win over hash_ids
    const textIds = tokenBlockIds(bytes(text), BS).map(u64);
    await until(() =>
      textIds.every((h) =>
        received.some((m) => m.batch.events.some((e) => e.type === 'stored' && e.blockHashes.includes(h))),
      ),
    );
    const storedText = received
      .flatMap((m) => m.batch.events)
      .filter(
        (e): e is Extract<KvEvent, { type: 'stored' }> => e.type === 'stored' && textIds.includes(e.blockHashes[0]!),
      );
    expect(storedText.flatMap((e) => e.tokenIds)).toEqual(Array.from(bytes(text).subarray(0, textIds.length * BS)));
  });

  it('answers a prompt the tokenizer refuses with a 400 naming the reason', async () => {
    const { status, json } = await post('/v1/completions', { prompt: 'untokenizable input' });
    expect(status).toBe(400);
    expect(json.error.message).toBe('the prompt could not be tokenized: no template for this');
    // Token ids need no tokenizer.
    expect((await post('/v1/completions', { prompt: [1, 2, 3] })).status).toBe(200);
  });
});
