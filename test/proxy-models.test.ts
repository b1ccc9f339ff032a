/**
 * Routing by model: a two-model fleet of `kvroute sim serve --model A` and `--model B` engines
 * behind one proxy, model discovery (periodic, with an API key, none at all), pinned models,
 * LoRA-style fleets where one engine serves a model the others lack, and the model label.
 */
import OpenAI, { NotFoundError } from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';

import { createProxyMetrics } from '../src/proxy/observe/proxy-metrics.js';
import { post, startProxy, startStub, type ProxyRig, type StubUpstream } from './helpers/proxy-harness.js';
import { startSimServe, type SimServeChild } from './helpers/sim-serve-child.js';

type ErrorReply = { error: { code: string; param: string | null; message: string } };
const chat = (model: string, extra: object = {}) => ({
  model,
  messages: [{ role: 'user', content: `hello from a user of ${model}` }],
  max_tokens: 2,
  ...extra,
});

describe('a two-model fleet: kvroute sim serve --model A and --model B behind one proxy', () => {
  let fleetA: SimServeChild;
  let fleetB: SimServeChild;
  let rig: ProxyRig;
  let client: OpenAI;
  const metrics = createProxyMetrics({ defaultMetrics: false });
  beforeAll(async () => {
    [fleetA, fleetB] = await Promise.all([
      startSimServe(2, ['--model', 'model-a', '--speed', '50']),
      startSimServe(1, ['--model', 'model-b', '--speed', '50']),
    ]);
    rig = await startProxy({
      backends: [...fleetA.urls, ...fleetB.urls],
      observers: [metrics.observer],
      mounts: [metrics.mount],
    });
    client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'unused', maxRetries: 0 });
  });
  afterAll(async () => {
    await rig?.close();
    await Promise.all([fleetA?.stop(), fleetB?.stop()]);
  });

  it('routes each request only among the engines that serve its model', async () => {
    const [b] = fleetB.urls;
    for (let i = 0; i < 10; i++) {
      const response = await post(rig.base, '/v1/chat/completions', chat('model-b'), { 'x-session-id': `b-${i}` });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-kvroute-instance')).toBe(b);
      expect(((await response.json()) as { model: string }).model).toBe('model-b');
    }
    const placed = new Set<string>();
    for (let i = 0; i < 10; i++) {
      const response = await post(rig.base, '/v1/chat/completions', chat('model-a', { user: `a-${i}` }));
      expect(response.status).toBe(200);
      placed.add(response.headers.get('x-kvroute-instance')!);
      await response.arrayBuffer();
    }
    expect([...placed].every((url) => fleetA.urls.includes(url))).toBe(true);
  });

  it('an unknown model is 404 model_not_found from the proxy, no engine touched', async () => {
    const routedBefore = rig.observer.named('routed').length;
    const response = await post(rig.base, '/v1/chat/completions', chat('gpt-5'));
    expect(response.status).toBe(404);
    const reply = (await response.json()) as ErrorReply;
    expect(reply.error).toMatchObject({ code: 'model_not_found', param: 'model' });
    expect(reply.error.message).toMatch(/gpt-5/);
    expect(rig.observer.named('routed').length).toBe(routedBefore);
    await expect(client.chat.completions.create(chat('gpt-5') as never)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('/v1/models is the union; models.retrieve works; /ready counts per model', async () => {
    const list = await client.models.list();
    expect(list.data.map((m) => m.id)).toEqual(['model-a', 'model-b']);
    const b = await client.models.retrieve('model-b');
    expect(b).toMatchObject({ id: 'model-b', object: 'model' });
    await expect(client.models.retrieve('gpt-5')).rejects.toBeInstanceOf(NotFoundError);
    const ready = (await (await fetch(`${rig.base}/ready`)).json()) as { models: Record<string, number> };
    expect(ready.models).toEqual({ 'model-a': 2, 'model-b': 1 });
  });

  it('a sticky session keeps one pin per model; a pin never crosses to an engine without the model', async () => {
    rig.proxy.state.setPolicy('sticky');
    try {
      const where = async (model: string) => {
        const response = await post(rig.base, '/v1/chat/completions', chat(model), { 'x-session-id': 'agent-7' });
        expect(response.status).toBe(200);
        await response.arrayBuffer();
        return response.headers.get('x-kvroute-instance')!;
      };
      const a1 = await where('model-a');
      expect(fleetA.urls).toContain(a1);
      expect(await where('model-b')).toBe(fleetB.urls[0]);
      expect(await where('model-a')).toBe(a1); // its model-a pin survived the model-b turn
      expect(await where('model-b')).toBe(fleetB.urls[0]);
    } finally {
      rig.proxy.state.setPolicy('unified');
    }
  });

  it("draining model B's engine: B gets 503, A is untouched", async () => {
    const [b] = fleetB.urls;
    rig.proxy.state.drainBackend(b!);
    const refused = await post(rig.base, '/v1/chat/completions', chat('model-b'));
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(((await refused.json()) as ErrorReply).error).toMatchObject({
      code: 'no_healthy_backend',
      message: 'no healthy backend serving model-b can take the request; retry shortly',
    });
    for (let i = 0; i < 4; i++) {
      const response = await post(rig.base, '/v1/chat/completions', chat('model-a'));
      expect(response.status).toBe(200);
      expect(fleetA.urls).toContain(response.headers.get('x-kvroute-instance'));
      await response.arrayBuffer();
    }
    expect((await fetch(`${rig.base}/ready`)).status).toBe(200); // model A still serves
  });

  it('/metrics carries the model label', async () => {
    const text = await (await fetch(`${rig.base}/metrics`)).text();
    const served = /kvroute_requests_total\{[^}]*status="200",outcome="success",model="model-b"\} (\d+)/.exec(text);
    expect(Number(served?.[1])).toBeGreaterThanOrEqual(10);
    expect(text).toMatch(/kvroute_requests_total\{[^}]*instance="none",[^}]*status="404",outcome="error",model=""\}/);
    expect(text).toMatch(/kvroute_e2e_request_latency_seconds_count\{instance="[^"]+",model="model-a"\}/);
  });
});

describe('model discovery', () => {
  const stubs: StubUpstream[] = [];
  const rigs: ProxyRig[] = [];
  afterEach(async () => {
    for (const r of rigs.splice(0)) await r.close();
    for (const s of stubs.splice(0)) await s.close();
  });
  const stub = async (...args: Parameters<typeof startStub>) => {
    const s = await startStub(...args);
    stubs.push(s);
    return s;
  };
  const proxy = async (options: Parameters<typeof startProxy>[0]) => {
    const r = await startProxy(options);
    rigs.push(r);
    return r;
  };
  const ok = (_req: unknown, res: import('node:http').ServerResponse) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');

  it('a LoRA adapter served by one engine goes to that engine only; a new adapter is found by the next discovery', async () => {
    const models = ['base', 'lora-1'];
    const withLora = await stub(ok, 0, { models });
    const plain = await stub(ok, 0, { models: ['base'] });
    let discovered!: () => void;
    const loaded = new Promise<void>((resolve) => (discovered = resolve));
    const rig = await proxy({
      backends: [withLora.url, plain.url],
      policy: 'round_robin',
      modelsIntervalMs: 100,
      onWarning: (m) => {
        if (m.includes('now serves base, lora-1, lora-2')) discovered();
      },
    });
    for (let i = 0; i < 4; i++) {
      const r = await post(rig.base, '/v1/chat/completions', chat('lora-1'));
      expect(r.headers.get('x-kvroute-instance')).toBe(withLora.url);
      await r.arrayBuffer();
    }
    const base = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const r = await post(rig.base, '/v1/chat/completions', chat('base'));
      base.add(r.headers.get('x-kvroute-instance')!);
      await r.arrayBuffer();
    }
    expect(base).toEqual(new Set([withLora.url, plain.url]));
    expect((await post(rig.base, '/v1/chat/completions', chat('lora-2'))).status).toBe(404);
    models.push('lora-2'); // loaded at run time (vLLM's /v1/load_lora_adapter)
    await loaded; // the warning that the engine's models changed (bounded by the test timeout)
    expect(rig.proxy.state.modelAvailability('lora-2')).toBe('routable');
    const r = await post(rig.base, '/v1/chat/completions', chat('lora-2'));
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-instance')).toBe(withLora.url);
  });

  it('discovery sends --backend-api-key; without it the backend takes any model, with one warning', async () => {
    const guarded = (key: string) =>
      stub(
        (req, res) => {
          if (req.url === '/health') return void res.writeHead(200).end();
          if (req.url === '/v1/models') {
            if (req.headers.authorization !== `Bearer ${key}`) return void res.writeHead(401).end();
            return void res.writeHead(200).end('{"object":"list","data":[{"id":"secret-model"}]}');
          }
          ok(req, res);
        },
        0,
        { control: false },
      );
    const keyed = await guarded('k-123');
    const warnings: string[] = [];
    const withKey = await proxy({ backends: [keyed.url], backendApiKey: 'k-123' });
    expect(withKey.proxy.state.snapshot()[0]!.models).toEqual(['secret-model']);
    const without = await proxy({ backends: [keyed.url], onWarning: (m) => warnings.push(m) });
    expect(without.proxy.state.snapshot()[0]!.models).toBeUndefined();
    expect(warnings.filter((w) => w.includes('/v1/models answered 401'))).toHaveLength(1);
    expect(warnings[0]).toMatch(/set --backend-api-key, or pin the backend's models/);
    const r = await post(without.base, '/v1/chat/completions', chat('anything'));
    expect(r.status).toBe(200); // models unknown: it takes any model
  });

  it('pinned models are never asked for; an id with a slash is served by /v1/models/{id}, raw or encoded', async () => {
    const asked: string[] = [];
    const engine = await stub(
      (req, res) => {
        asked.push(req.url ?? '');
        if (req.url === '/health') return void res.writeHead(200).end();
        ok(req, res);
      },
      0,
      { control: false },
    );
    const rig = await proxy({ backends: [{ url: engine.url, models: ['Qwen/Qwen3-8B', 'my-lora'] }] });
    expect(asked).toEqual(['/health']);
    for (const path of ['Qwen/Qwen3-8B', 'Qwen%2FQwen3-8B']) {
      const response = await fetch(`${rig.base}/v1/models/${path}`);
      expect(response.status).toBe(200);
      expect(await response.json()).toMatchObject({ id: 'Qwen/Qwen3-8B', object: 'model' });
    }
    const client = new OpenAI({ baseURL: `${rig.base}/v1`, apiKey: 'unused', maxRetries: 0 });
    expect((await client.models.retrieve('Qwen/Qwen3-8B')).id).toBe('Qwen/Qwen3-8B');
    expect((await fetch(`${rig.base}/v1/models/nope`)).status).toBe(404);
    expect((await post(rig.base, '/v1/chat/completions', chat('my-lora'))).status).toBe(200);
  });
});
