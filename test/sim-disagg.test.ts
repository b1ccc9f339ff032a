/**
 * `kvroute sim serve`'s side of vLLM's disaggregated prefill (docs/sim-serve.md, "Disaggregated
 * prefill"): the prefill phase answers one token and the kv_transfer_params naming its held KV;
 * the decode phase on another engine of the fleet waits the transfer time (engine time, cold on a
 * pair's first use), then serves holding the KV as cached, streaming or not; bad params are 400s
 * naming the field; a client leaving mid-transfer leaves nothing held; unclaimed KV expires.
 *
 * Tests run the fleet in process, read its engines' clocks, and wait on events (the transfer
 * wait being armed, a hold being released), never on sleeps.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';

import { simServeVerb } from '../src/cli/sim-serve-verb.js';
import { DEFAULT_OFFLOAD_COST, transferMs } from '../src/core/offload-cost.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';

const MODEL = 'qwen3-coder-30b-a3b';
const PREFILL_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

let fleet: SimFleet;
let nextId = 1_000_000 + Math.floor(Math.random() * 1e9);
beforeAll(async () => {
  fleet = await startSimFleet({ instances: 3, port: 0, speed: 100 });
});
afterAll(() => fleet?.close());
afterEach(() => vi.restoreAllMocks());

/** A completion body whose prompt is `tokens` tokens in fresh blocks (or those of `ids`). */
function prompt(tokens: number, ids?: number[]): Record<string, unknown> {
  const hashIds = ids ?? Array.from({ length: Math.ceil(tokens / 16) }, () => nextId++);
  return { model: MODEL, prompt: 'hashed by ids', hash_ids: hashIds, input_tokens: tokens, max_tokens: 6 };
}

/** What the tests read of an answer: a completion (with the prefill phase's params) or an error. */
interface Answer {
  id: string;
  object: string;
  choices: Array<{ text?: string; finish_reason?: string; message?: { content: string } }>;
  usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details: { cached_tokens: number } };
  kv_transfer_params: {
    remote_engine_id: string;
    remote_block_ids: number[];
    remote_request_id: string;
    remote_port: number;
    [field: string]: unknown;
  };
  error: { message: string; type: string; code: number };
}

async function post(base: string, path: string, body: unknown, signal?: AbortSignal) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal === undefined ? {} : { signal }),
  });
  return { status: response.status, body: (await response.json()) as Answer };
}

/** The prefill phase, as the proxy sends it: max_tokens 1, not streamed, do_remote_decode. */
async function prefill(engine: number, body: Record<string, unknown>, path = '/v1/completions') {
  const answer = await post(fleet.urls[engine]!, path, {
    ...body,
    max_tokens: 1,
    stream: false,
    kv_transfer_params: PREFILL_PARAMS,
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body;
}

/** Resolves when `object[method]` is next called (calling through). */
function nextCall<T extends object>(object: T, method: keyof T & string): Promise<void> {
  return new Promise((resolve) => {
    const original = (object[method] as (...args: unknown[]) => unknown).bind(object);
    vi.spyOn(object, method as never).mockImplementation(((...args: unknown[]) => {
      const result = original(...args);
      resolve();
      return result;
    }) as never);
  });
}

async function metric(engine: number, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${fleet.urls[engine]}/metrics`)).text();
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.includes(w)));
  if (line === undefined) throw new Error(`no ${name} ${JSON.stringify(labels)} in /metrics`);
  return Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('the prefill phase (do_remote_decode)', () => {
  it('answers one token and the kv_transfer_params naming the KV it holds', async () => {
    const p = fleet.engines[0]!;
    const answer = await prefill(0, prompt(1000));
    expect(answer.choices[0]).toMatchObject({ text: ' tok', finish_reason: 'length' });
    expect(answer.usage).toMatchObject({
      prompt_tokens: 1000,
      completion_tokens: 1,
      prompt_tokens_details: { cached_tokens: 0 },
    });
    const params = answer.kv_transfer_params;
    expect(params).toEqual({
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: p.engineId,
      remote_block_ids: expect.any(Array),
      remote_request_id: answer.id,
      remote_host: '127.0.0.1',
      remote_port: p.port,
      tp_size: 1,
    });
    // 62 full blocks named in the pool and a partial one: 63 distinct ids, all held.
    expect(params.remote_block_ids).toHaveLength(63);
    expect(new Set(params.remote_block_ids).size).toBe(63);
    expect(params.remote_block_ids.slice(0, 62).every((id: number) => id < p.engine.pool.capacity)).toBe(true);
    expect(params.remote_block_ids[62]).toBeGreaterThanOrEqual(p.engine.pool.capacity);
    expect(p.holds.size).toBe(1);
    expect(p.engine.pool.referenced).toBe(63);
    expect(await metric(0, 'kvroute_sim_kv_held_requests')).toBe(1);
    // Leave nothing held for the next tests: the hold's own release frees the blocks.
    p.holds.release(p.holds.find(answer.id, [])!);
    expect(p.engine.pool.referenced).toBe(0);
  });

  it('chat too; and it refuses to stream, naming the field', async () => {
    const messages = [{ role: 'user', content: `chat prefill ${nextId++} ${'words '.repeat(300)}` }];
    const answer = await prefill(0, { model: MODEL, messages, max_completion_tokens: 1 }, '/v1/chat/completions');
    expect(answer.object).toBe('chat.completion');
    expect(answer.choices[0]!.message!.content).toBe(' tok');
    expect(answer.kv_transfer_params.remote_request_id).toBe(answer.id);
    fleet.engines[0]!.holds.release(fleet.engines[0]!.holds.find(answer.id, [])!);
    const streamed = await post(fleet.urls[0]!, '/v1/completions', {
      ...prompt(100),
      stream: true,
      kv_transfer_params: PREFILL_PARAMS,
    });
    expect(streamed.status).toBe(400);
    expect(streamed.body.error.message).toMatch(/^stream must be false with kv_transfer_params\.do_remote_decode/);
  });
});

describe('the decode phase (do_remote_prefill)', () => {
  it('waits the cold transfer in engine time, then serves with the transferred tokens cached', async () => {
    const [p, d] = [fleet.engines[0]!, fleet.engines[1]!];
    const body = prompt(8192);
    const params = (await prefill(0, body)).kv_transfer_params;
    const transferS = transferMs(DEFAULT_OFFLOAD_COST, 8192, true) / 1000;
    const before = d.realtime.now();
    const answer = await post(fleet.urls[1]!, '/v1/completions', { ...body, kv_transfer_params: params });
    const elapsed = d.realtime.now() - before;
    expect(answer.status).toBe(200);
    expect(answer.body.choices[0]!.text).toBe(' tok'.repeat(6));
    expect(answer.body.usage).toEqual({
      prompt_tokens: 8192,
      completion_tokens: 6,
      total_tokens: 8198,
      prompt_tokens_details: { cached_tokens: 8191 },
    });
    expect(answer.body).not.toHaveProperty('kv_transfer_params');
    expect(elapsed).toBeGreaterThanOrEqual(transferS);
    // The prefill engine freed its blocks (cached now); the decode engine caches the prompt.
    expect(p.holds.size).toBe(0);
    expect(p.engine.pool.referenced).toBe(0);
    expect(p.engine.pool.matchPrefix(body.hash_ids as number[])).toBe(512);
    expect(d.engine.pool.matchPrefix(body.hash_ids as number[])).toBe(512);
    expect(d.transfers).toMatchObject({ transfers: { warm: 0, cold: 1 }, tokens: 8192 });
    expect(await metric(1, 'kvroute_sim_kv_transfers_total', { connection: 'cold' })).toBe(1);
    expect(await metric(1, 'kvroute_sim_kv_transfer_seconds_total', { connection: 'cold' })).toBeCloseTo(transferS, 9);
    expect(await metric(1, 'kvroute_sim_kv_transferred_tokens_total')).toBe(8192);
    // The KV is gone from the prefill engine's holds: a second decode of it is refused.
    const again = await post(fleet.urls[1]!, '/v1/completions', { ...body, kv_transfer_params: params });
    expect(again.status).toBe(400);
    expect(again.body.error.message).toMatch(/^kv_transfer_params\.remote_request_id: engine .* holds no KV for it/);
  });

  it('warm on the pair’s second use; moves only what the decode engine lacks; streams with usage', async () => {
    const d = fleet.engines[1]!;
    // The decode engine already caches the first 2,048 tokens of this prompt.
    const ids = Array.from({ length: 256 }, () => nextId++);
    const warmUp = await post(fleet.urls[1]!, '/v1/completions', { ...prompt(2048, ids.slice(0, 128)), max_tokens: 1 });
    expect(warmUp.status).toBe(200);
    const body = { ...prompt(4096, ids), stream: true, stream_options: { include_usage: true } };
    const params = (await prefill(0, { ...body, stream: undefined, stream_options: undefined })).kv_transfer_params;
    const transferS = transferMs(DEFAULT_OFFLOAD_COST, 2048, false) / 1000;
    const before = d.realtime.now();
    const response = await fetch(`${fleet.urls[1]}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, kv_transfer_params: params }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = await response.text();
    const firstChunkBound = d.realtime.now() - before;
    const events = text.split('\n\n').filter((e) => e !== '');
    expect(events.at(-1)).toBe('data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
    expect(
      chunks
        .slice(0, -1)
        .map((c) => c.choices[0].text)
        .join(''),
    ).toBe(' tok'.repeat(6));
    expect(chunks.at(-1).usage).toMatchObject({ prompt_tokens: 4096, prompt_tokens_details: { cached_tokens: 4095 } });
    expect(firstChunkBound).toBeGreaterThanOrEqual(transferS);
    expect(d.transfers.transfers).toEqual({ warm: 1, cold: 1 });
    expect(d.transfers.seconds.warm).toBeCloseTo(transferS, 12);
    expect(d.transfers.tokens).toBe(8192 + 2048);
  });

  it('chat, non-streaming, from another prefill engine: that pair is cold', async () => {
    const body = {
      model: MODEL,
      messages: [{ role: 'user', content: `decode me ${nextId++} ${'text '.repeat(500)}` }],
      max_tokens: 3,
    };
    const first = await prefill(2, body, '/v1/chat/completions');
    const answer = await post(fleet.urls[1]!, '/v1/chat/completions', {
      ...body,
      kv_transfer_params: first.kv_transfer_params,
    });
    expect(answer.status).toBe(200);
    expect(answer.body.choices[0]!.message!.content).toBe(' tok'.repeat(3));
    expect(answer.body.usage.prompt_tokens_details.cached_tokens).toBe(answer.body.usage.prompt_tokens - 1);
    expect(fleet.engines[1]!.transfers.transfers).toEqual({ warm: 1, cold: 2 });
  });
});

describe('bad kv_transfer_params: 400 naming the field', () => {
  const decode = (params: unknown) =>
    post(fleet.urls[1]!, '/v1/completions', { ...prompt(64), kv_transfer_params: params });

  it.each([
    [5, /^kv_transfer_params must be an object, got/],
    [{ do_remote_decode: 'yes' }, /^kv_transfer_params\.do_remote_decode must be a boolean, got/],
    [{ do_remote_decode: true, do_remote_prefill: true }, /^kv_transfer_params\.do_remote_prefill must be false when/],
    [{ do_remote_prefill: true }, /^kv_transfer_params\.remote_engine_id must be a string \(required with/],
    [{ do_remote_prefill: true, remote_engine_id: '' }, /^kv_transfer_params\.remote_engine_id must be a non-empty/],
    [
      { do_remote_prefill: true, remote_engine_id: 'x', remote_block_ids: 3 },
      /^kv_transfer_params\.remote_block_ids must be an array/,
    ],
    [
      { do_remote_prefill: true, remote_engine_id: 'x', remote_block_ids: [1, -1] },
      /^kv_transfer_params\.remote_block_ids\[1\] must be an integer >= 0, got -1/,
    ],
    [
      { do_remote_prefill: true, remote_engine_id: 'x', remote_block_ids: [], remote_host: 'h', remote_port: 0 },
      /^kv_transfer_params\.remote_port must be an integer in \[1, 65535\], got 0/,
    ],
    [
      {
        do_remote_prefill: true,
        remote_engine_id: 'x',
        remote_block_ids: [],
        remote_host: 'h',
        remote_port: 1,
        tp_size: 2,
      },
      /^kv_transfer_params\.tp_size must be an integer in \[1, 1\], got 2/,
    ],
  ])('%j', async (params, message) => {
    const answer = await decode(params);
    expect(answer.status).toBe(400);
    expect(answer.body.error).toMatchObject({ type: 'BadRequestError', code: 400 });
    expect(answer.body.error.message).toMatch(message);
  });

  it('an unknown remote engine (another fleet’s, or made up), a wrong host or port, another prompt', async () => {
    const other = await startSimFleet({ instances: 1, port: 0, speed: 100 });
    try {
      const body = prompt(512);
      const foreign = await post(other.urls[0]!, '/v1/completions', {
        ...body,
        max_tokens: 1,
        kv_transfer_params: PREFILL_PARAMS,
      });
      const params = foreign.body.kv_transfer_params;
      expect(params.remote_engine_id).not.toBe(fleet.engines[0]!.engineId);
      expect(params.remote_engine_id.endsWith('-0')).toBe(true);
      const unknown = await decode({ ...params });
      expect(unknown.status).toBe(400);
      expect(unknown.body.error.message).toBe(
        `kv_transfer_params.remote_engine_id: no engine "${params.remote_engine_id}" in this simulated fleet`,
      );
    } finally {
      await other.close();
    }
    const body = prompt(512);
    const params = (await prefill(0, body)).kv_transfer_params;
    const wrong = async (change: Record<string, unknown>, withBody = body) =>
      post(fleet.urls[1]!, '/v1/completions', { ...withBody, kv_transfer_params: { ...params, ...change } });
    expect((await wrong({ remote_host: '10.0.0.1' })).body.error.message).toMatch(
      /^kv_transfer_params\.remote_host: engine .* listens on 127\.0\.0\.1, not 10\.0\.0\.1$/,
    );
    expect((await wrong({ remote_port: params.remote_port === 1 ? 2 : 1 })).body.error.message).toMatch(
      /^kv_transfer_params\.remote_port: /,
    );
    expect((await wrong({ remote_block_ids: [1, 2, 3] })).body.error.message).toMatch(
      /^kv_transfer_params\.remote_block_ids: are not the blocks/,
    );
    expect((await wrong({ remote_request_id: undefined, remote_block_ids: [1, 2, 3] })).body.error.message).toMatch(
      /^kv_transfer_params\.remote_block_ids: engine .* holds no KV for it/,
    );
    expect((await wrong({}, prompt(512))).body.error.message).toBe(
      "kv_transfer_params.remote_block_ids: hold the KV of another prompt (512 tokens), not this request's (512 tokens)",
    );
    // None of those claimed it: the right request still gets it, found by its block ids alone.
    const right = await wrong({ remote_request_id: null });
    expect(right.status).toBe(200);
    expect(right.body.usage.prompt_tokens_details.cached_tokens).toBe(511);
  });
});

describe('abort, expiry, close', () => {
  it('a client leaving during the transfer wait releases everything on both engines', async () => {
    const slow = await startSimFleet({ instances: 2, port: 0, speed: 100, transferCost: { linkGbps: 0.01 } });
    try {
      const [p, d] = slow.engines as [(typeof slow.engines)[0], (typeof slow.engines)[0]];
      const body = prompt(4096);
      const first = await post(slow.urls[0]!, '/v1/completions', {
        ...body,
        max_tokens: 1,
        kv_transfer_params: PREFILL_PARAMS,
      });
      expect(p.holds.size).toBe(1);
      const armed = nextCall(d.realtime, 'after'); // the transfer wait (~5 engine minutes at 0.01 Gbps)
      const released = nextCall(p.holds, 'release');
      const controller = new AbortController();
      const pending = post(
        slow.urls[1]!,
        '/v1/completions',
        { ...body, kv_transfer_params: first.body.kv_transfer_params },
        controller.signal,
      );
      await armed;
      expect(p.holds.find(undefined, first.body.kv_transfer_params.remote_block_ids)).toBeUndefined(); // claimed
      controller.abort();
      await expect(pending).rejects.toThrow();
      await released;
      expect(p.holds.size).toBe(0);
      expect(p.engine.pool.referenced).toBe(0);
      expect(d.engine.pool.referenced).toBe(0);
      expect(d.realtime.liveRequests).toBe(0);
      expect(d.transfers).toMatchObject({ aborted: 1, transfers: { warm: 0, cold: 0 }, tokens: 0 });
    } finally {
      await slow.close();
    }
  });

  it('a client leaving during the prefill phase leaves nothing held', async () => {
    const p = fleet.engines[2]!;
    const submitted = nextCall(p.realtime, 'submit');
    const aborted = nextCall(p.realtime, 'abort');
    const controller = new AbortController();
    // 200k tokens: about 2 minutes of engine time, over a second of wall time at --speed 100.
    const pending = post(
      fleet.urls[2]!,
      '/v1/completions',
      { ...prompt(200_000), max_tokens: 1, kv_transfer_params: PREFILL_PARAMS },
      controller.signal,
    );
    await submitted;
    controller.abort();
    await expect(pending).rejects.toThrow();
    await aborted;
    expect(p.holds.size).toBe(0);
    expect(p.engine.pool.referenced).toBe(0);
  });

  it('unclaimed KV is freed after the hold timeout, counted; the decode then gets a 400', async () => {
    const short = await startSimFleet({ instances: 2, port: 0, speed: 100, kvHoldTimeoutS: 1 });
    try {
      const p = short.engines[0]!;
      const body = prompt(256);
      const expired = nextCall(p.holds, 'release');
      const first = await post(short.urls[0]!, '/v1/completions', {
        ...body,
        max_tokens: 1,
        kv_transfer_params: PREFILL_PARAMS,
      });
      expect(first.status).toBe(200);
      await expired;
      expect(p.holds.expired).toBe(1);
      expect(p.engine.pool.referenced).toBe(0);
      const late = await post(short.urls[1]!, '/v1/completions', {
        ...body,
        kv_transfer_params: first.body.kv_transfer_params,
      });
      expect(late.status).toBe(400);
      const text = await (await fetch(`${short.urls[0]}/metrics`)).text();
      expect(text).toMatch(/^kvroute_sim_kv_holds_expired_total\{[^}]*\} 1$/m);
      expect(text).toMatch(/^kvroute_sim_kv_held_requests\{[^}]*\} 0$/m);
    } finally {
      await short.close();
    }
    await expect(startSimFleet({ instances: 1, port: 0, kvHoldTimeoutS: 0 })).rejects.toThrow(
      /kvHoldTimeoutS must be a finite number > 0/,
    );
  });
});

describe('kvroute sim serve: the link flags', () => {
  it('time transfers by --link-gbps, --layerwise and the overheads, and refuse bad ones', async () => {
    const controller = new AbortController();
    const urls = new Promise<string[]>((resolve) => {
      vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
        resolve(String(chunk).trim().split('\n'));
        return true;
      });
    });
    const stderr = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const args = {
      instances: '2',
      port: '0',
      speed: '100',
      'link-gbps': '100',
      layerwise: true,
      'warm-overhead-ms': '5',
      'cold-penalty-ms': '20',
    };
    const serving = simServeVerb(args, { signal: controller.signal });
    try {
      const [p, d] = await urls;
      const body = prompt(16384);
      const first = await post(p!, '/v1/completions', { ...body, max_tokens: 1, kv_transfer_params: PREFILL_PARAMS });
      const answer = await post(d!, '/v1/completions', { ...body, kv_transfer_params: first.body.kv_transfer_params });
      expect(answer.status).toBe(200);
      const model = { ...DEFAULT_OFFLOAD_COST, linkGbps: 100, layerwise: true, warmOverheadMs: 5, coldPenaltyMs: 20 };
      const text = await (await fetch(`${d}/metrics`)).text();
      const seconds = /^kvroute_sim_kv_transfer_seconds_total\{connection="cold"[^}]*\} (\S+)$/m.exec(text)![1]!;
      expect(Number(seconds)).toBeCloseTo(transferMs(model, 16384, true) / 1000, 9);
      expect(stderr.mock.calls.map((c) => String(c[0])).join('')).toContain('KV link 100 Gbps, layer-wise');
    } finally {
      controller.abort();
      await serving;
    }
    await expect(simServeVerb({ 'link-gbps': '-1' })).rejects.toThrow('--link-gbps must be a positive number, got -1');
    await expect(simServeVerb({ 'warm-overhead-ms': 'x' })).rejects.toThrow(
      '--warm-overhead-ms must be a non-negative number, got x',
    );
  });
});
