/**
 * Discovered backends fed by their engines' KV events (docs/discovery.md "KV events"): `sim serve`
 * engines on 127.0.0.5 and 127.0.0.6 at one HTTP port, each publishing vLLM KV events on one ZeroMQ
 * port of its own address, as pods do; the proxy starts with no backends, `dns:NAME:PORT` and the
 * template `tcp://{host}:EVENTS_PORT`:
 * - each discovered engine's subscription goes live, and a session's later turns are predicted
 *   exactly (predicted cached tokens = the engine's cached tokens), with token keys;
 * - an engine gone from DNS loses its instance and its subscription;
 * - bad templates are refused at start, naming the field (options and serve's flags).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { resolveServeConfig } from '../src/cli/serve-config.js';
import { createProxy } from '../src/proxy/server/proxy-server.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { TokenizerPool } from '../src/tokenize/tokenizer-pool.js';
import { poolTokenizer } from './helpers/pool-tokenizer.js';
import { MODEL } from './helpers/proxy-harness.js';
import { portFreeOn, TestDns } from './helpers/test-dns.js';
import { waitFor } from './helpers/wait-for.js';

const HOSTS = ['127.0.0.5', '127.0.0.6'];
const NAME = 'kv.engines.fleet.test';
let dns: TestDns;
let httpPort: number;
let eventsPort: number;
let engines: SimFleet[];
let enginePool: TokenizerPool;
const url = (host: string) => `http://${host}:${httpPort}`;

beforeAll(async () => {
  dns = await TestDns.start();
  httpPort = await portFreeOn(HOSTS);
  do eventsPort = await portFreeOn(HOSTS);
  while (eventsPort === httpPort);
  enginePool = await TokenizerPool.open({ tokenizers: { '*': 'qwen3' }, threads: 1 });
  engines = [];
  for (const host of HOSTS)
    engines.push(
      await startSimFleet({
        instances: 1,
        port: httpPort,
        host,
        speed: 50,
        model: MODEL,
        kvEvents: { port: eventsPort },
        tokenizer: poolTokenizer(enginePool),
      }),
    );
}, 60_000);
afterAll(async () => {
  for (const fleet of engines ?? []) await fleet.close();
  await enginePool?.close();
  dns?.close();
});

const text = (k: number) => `Turn ${k}: ${'the quick brown fox jumps over the lazy dog; '.repeat(30)}`;

describe('DNS discovery with KV events', () => {
  it('subscribes each discovered engine to its own events, predicts a session exactly, and unsubscribes a gone one', async () => {
    dns.a.set(NAME, [...HOSTS]);
    const warnings: string[] = [];
    const proxy = createProxy({
      backends: [],
      tokenizers: { [MODEL]: 'qwen3' },
      discovery: {
        spec: `dns:${NAME}:${httpPort}`,
        intervalMs: 300,
        servers: [dns.server],
        kvEvents: `tcp://{host}:${eventsPort}`,
      },
      healthIntervalMs: 200,
      onWarning: (w) => warnings.push(w),
    });
    // Event-fed from the start: the tokenizer pool opens before any backend is discovered.
    expect(proxy.state.eventFed).toBe(true);
    const { port } = await proxy.listen(0, '127.0.0.1');
    const base = `http://127.0.0.1:${port}`;
    const instances = () => proxy.router.stats().instances;
    /** Per engine: the KV event messages it has published, and how many the proxy has received. */
    const eventCounts = () =>
      engines.map((fleet, k) => ({
        published: fleet.engines[0]!.kvEventPublisher!.seq,
        received: instances().find((i) => i.instance === url(HOSTS[k]!))?.kvEvents?.messages ?? 0,
      }));
    try {
      await waitFor('both discovered engines to be event-fed', () =>
        HOSTS.every((h) => instances().find((i) => i.instance === url(h))?.kvEvents?.fed === true),
      );

      const messages: Array<{ role: string; content: string }> = [];
      const seen: Array<{ predicted: number; cached: number; reason: string; instance: string }> = [];
      for (let turn = 0; turn < 3; turn++) {
        messages.push({ role: 'user', content: text(turn) });
        const before = eventCounts();
        const response = await fetch(`${base}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-session-id': 'discovered-session' },
          body: JSON.stringify({ model: MODEL, messages, max_tokens: 8 }),
        });
        expect(response.status).toBe(200);
        const body = (await response.json()) as {
          choices: Array<{ message: { content: string } }>;
          usage: { prompt_tokens_details: { cached_tokens: number } };
        };
        messages.push({ role: 'assistant', content: body.choices[0]!.message.content });
        seen.push({
          predicted: Number(response.headers.get('x-kvroute-predicted-cached-tokens')),
          cached: body.usage.prompt_tokens_details.cached_tokens,
          reason: response.headers.get('x-kvroute-reason')!,
          instance: response.headers.get('x-kvroute-instance')!,
        });
        // The next turn must see this one's blocks: every message the engines published since is in.
        await waitFor("the engines' KV events of the turn to arrive", () =>
          eventCounts().every((now, k) => now.received - before[k]!.received >= now.published - before[k]!.published),
        );
      }
      expect(seen.every((s) => !s.reason.includes('keys='))).toBe(true);
      expect(seen.slice(1).every((s) => s.cached > 0)).toBe(true);
      expect(seen.map((s) => s.predicted)).toEqual(seen.map((s) => s.cached));

      // Gone from DNS: the instance, and with it its event subscription, leaves at the next resolution.
      const gone = HOSTS[0]!;
      dns.a.set(NAME, [HOSTS[1]!]);
      await waitFor('the removed engine to leave the router', () => instances().every((i) => i.instance !== url(gone)));
      expect(instances().map((i) => i.instance)).toEqual([url(HOSTS[1]!)]);
      expect(instances()[0]!.kvEvents?.fed).toBe(true);
      expect(warnings.join('\n')).toContain(`discovery removed backend ${url(gone)}`);

      // A backend whose subscription is refused is refused whole: no instance left in the router.
      expect(() => proxy.state.addBackend('http://127.0.0.9:8000', undefined, { kvEvents: 'tcp://nowhere' })).toThrow(
        /must be a ZeroMQ endpoint/,
      );
      expect(instances().map((i) => i.instance)).toEqual([url(HOSTS[1]!)]);
    } finally {
      await proxy.close({ graceMs: 1000 });
    }
  }, 60_000);

  it('refuses templates that cannot name each engine, naming the field', () => {
    const discovery = { spec: 'dns:engines:8000' };
    const refused: Array<[Record<string, string>, RegExp]> = [
      [
        { kvEvents: 'tcp://10.0.0.9:5557' },
        /options\.discovery\.kvEvents must put \{host\} where each engine's address goes/,
      ],
      [{ kvEvents: 'tcp://{host}' }, /options\.discovery\.kvEvents must be a ZeroMQ endpoint, tcp:\/\/HOST:PORT/],
      [{ kvEvents: 'tcp://{host}:99999' }, /options\.discovery\.kvEvents must be a ZeroMQ endpoint/],
      [{ kvReplay: 'tcp://{host}:5558' }, /options\.discovery\.kvReplay needs options\.discovery\.kvEvents/],
      [
        { kvEvents: 'tcp://{host}:5557', kvReplay: 'tcp://10.0.0.9:5558' },
        /options\.discovery\.kvReplay must put \{host\}/,
      ],
      [{ kvEvents: 'nats://127.0.0.1:4222/{host}' }, /a NATS event source is the whole fleet's stream/],
      [
        { kvEvents: 'nats://127.0.0.1:4222', kvReplay: 'tcp://{host}:5558' },
        /over NATS the stream itself is the replay/,
      ],
    ];
    for (const [templates, message] of refused)
      expect(
        () => createProxy({ backends: [], discovery: { ...discovery, ...templates } }),
        JSON.stringify(templates),
      ).toThrow(message);
  });

  it("serve's flags: the templates need --discover, are checked under their flag's name, and a NATS --events feeds discovered engines", () => {
    expect(() => resolveServeConfig({ 'discover-kv-events': 'tcp://{host}:5557' }, {})).toThrow(
      '--discover-kv-events needs --discover',
    );
    expect(() =>
      resolveServeConfig({ discover: 'dns:engines:8000', 'discover-kv-events': 'tcp://engine:5557' }, {}),
    ).toThrow(/--discover-kv-events must put \{host\}/);
    expect(() =>
      resolveServeConfig({ discover: 'dns:engines:8000', 'discover-kv-replay': 'tcp://{host}:5558' }, {}),
    ).toThrow('--discover-kv-replay needs --discover-kv-events');
    const zmq = resolveServeConfig(
      {
        discover: 'dns:engines:8000',
        'discover-kv-events': 'tcp://{host}:5557',
        'discover-kv-replay': 'tcp://{host}:5558',
      },
      {},
    );
    expect(zmq.proxy.discovery).toMatchObject({ kvEvents: 'tcp://{host}:5557', kvReplay: 'tcp://{host}:5558' });
    const fromEnv = resolveServeConfig(
      { discover: 'dns:engines:8000' },
      { KVROUTE_DISCOVER_KV_EVENTS: 'tcp://{host}:5557' },
    );
    expect(fromEnv.proxy.discovery?.kvEvents).toBe('tcp://{host}:5557');
    const nats = resolveServeConfig({ discover: 'dns:engines:8000', events: 'nats://127.0.0.1:4222' }, {});
    expect(nats.proxy.discovery?.kvEvents).toBe('nats://127.0.0.1:4222/default');
    expect(resolveServeConfig({ discover: 'dns:engines:8000' }, {}).proxy.discovery?.kvEvents).toBeUndefined();
  });
});
