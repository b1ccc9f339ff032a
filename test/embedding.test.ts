/**
 * The proxy embedded in other Node servers: `proxy.handleNode` as a plain http listener and as
 * Express middleware, and `kvrouteFastify(proxy)` in Fastify. Each serves the OpenAI routes
 * (stream and not, through the official client) while the host keeps its own routes.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

import express from 'express';
import Fastify from 'fastify';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { kvrouteFastify } from '../src/proxy/server/fastify-plugin.js';
import { createProxy, type Proxy } from '../src/proxy/server/proxy-server.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';

const MODEL = 'qwen3-coder-30b-a3b';
let fleet: SimFleet;
let proxy: Proxy;

beforeAll(async () => {
  fleet = await startSimFleet({ instances: 2, port: 0, speed: 50 });
  proxy = createProxy({ backends: fleet.urls, onWarning: () => {} });
  await proxy.started();
});

afterAll(async () => {
  await proxy?.close({ graceMs: 100 });
  await fleet?.close();
});

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const close = (server: Server) =>
  new Promise<void>((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections(); // keep-alive clients would hold close() for their idle timeout
  });

const inFlight = () => proxy.router.stats().inFlight;

/** Chat and completions, stream and not, through the openai client at `base`. */
async function speaksOpenAI(base: string): Promise<void> {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 });
  const messages = [{ role: 'user' as const, content: 'Embedded routing, please.' }];
  const { data: chat, response } = await client.chat.completions
    .create({ model: MODEL, messages, max_tokens: 5 })
    .withResponse();
  expect(chat.choices[0]!.message.content).toBeTruthy();
  expect(chat.usage!.prompt_tokens).toBeGreaterThan(0);
  expect(fleet.urls).toContain(response.headers.get('x-kvroute-instance'));
  expect(response.headers.get('x-kvroute-reason')).toMatch(/min_ttft|cache_slack|spread/);

  const stream = await client.chat.completions.create({
    model: MODEL,
    messages,
    max_tokens: 5,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: OpenAI.CompletionUsage | null | undefined;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
    usage = chunk.usage ?? usage;
  }
  expect(text.length).toBeGreaterThan(0);
  expect(usage!.completion_tokens).toBe(5);

  const completion = await client.completions.create({ model: MODEL, prompt: 'Once upon', max_tokens: 3 });
  expect(completion.usage!.completion_tokens).toBe(3);
  expect(inFlight()).toBe(0);
}

describe('proxy.handleNode', () => {
  it('serves the OpenAI routes from a plain node:http server', async () => {
    const server = createServer(proxy.handleNode);
    const base = await listen(server);
    try {
      await speaksOpenAI(base);
      const missing = await fetch(`${base}/nowhere`);
      expect(missing.status).toBe(404);
      expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('not_found');
      const wrong = await fetch(`${base}/v1/chat/completions`);
      expect(wrong.status).toBe(405);
      expect(wrong.headers.get('allow')).toBe('POST');
      await wrong.text();
      const bad = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: '{"model":' });
      expect(bad.status).toBe(400);
      await bad.text();
      expect((await fetch(`${base}/ready`)).status).toBe(200);
    } finally {
      await close(server);
    }
  });

  it('aborts the upstream and releases the ticket when the client leaves mid-stream', async () => {
    const server = createServer(proxy.handleNode);
    const base = await listen(server);
    try {
      const controller = new AbortController();
      const response = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          model: MODEL,
          messages: [{ role: 'user', content: 'x' }],
          max_tokens: 100_000,
          stream: true,
        }),
        signal: controller.signal,
      });
      const reader = response.body!.getReader();
      await reader.read();
      expect(inFlight()).toBe(1);
      controller.abort();
      const deadline = Date.now() + 5_000;
      while (inFlight() !== 0 && Date.now() < deadline) await new Promise((r) => setImmediate(r));
      expect(inFlight()).toBe(0);
      // The engine saw the disconnect: nothing runs or waits there any more.
      const busy = () => fleet.engines.some((e) => !e.realtime.engine.idle);
      const engineDeadline = Date.now() + 5_000;
      while (busy() && Date.now() < engineDeadline) await new Promise((r) => setTimeout(r, 5));
      expect(busy()).toBe(false);
    } finally {
      await close(server);
    }
  });
});

describe('examples/embed-http-server.mjs', () => {
  it('starts, routes a request and stops on SIGTERM', async () => {
    const script = fileURLToPath(new URL('../examples/embed-http-server.mjs', import.meta.url));
    const child = spawn(process.execPath, [script], { env: { ...process.env, PORT: '0' }, stdio: 'pipe' });
    try {
      const base = await new Promise<string>((resolve, reject) => {
        let out = '';
        child.stdout.on('data', (d: Buffer) => {
          out += d;
          const match = /listening on (http:\/\/\S+)/.exec(out);
          if (match !== null) resolve(match[1]!);
        });
        child.once('exit', (code) => reject(new Error(`the example exited with ${code}`)));
      });
      expect(await (await fetch(`${base}/`)).text()).toMatch(/my app/);
      const response = await fetch(`${base}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 8 }),
      });
      expect(response.status).toBe(200);
      expect(response.headers.get('x-kvroute-reason')).toBeTruthy();
      await response.json();
    } finally {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    }
  });
});

describe('Express', () => {
  it('mounts as middleware after a JSON body parser, leaving the host its own routes', async () => {
    const app = express();
    app.use(express.json({ limit: '8mb' })); // consumes the body: the proxy replays req.body
    app.get('/hello', (_req, res) => res.json({ from: 'express' }));
    app.use(proxy.handleNode);
    app.use((_req, res) => res.status(404).json({ from: 'express-404' }));
    const server = createServer(app);
    const base = await listen(server);
    try {
      await speaksOpenAI(base);
      expect(await (await fetch(`${base}/hello`)).json()).toEqual({ from: 'express' });
      expect(await (await fetch(`${base}/elsewhere`)).json()).toEqual({ from: 'express-404' });
    } finally {
      await close(server);
    }
  });
});

describe('Fastify', () => {
  it('takes the proxy paths before body parsing and leaves the rest to Fastify', async () => {
    const app = Fastify();
    await app.register(kvrouteFastify(proxy));
    app.get('/hello', async () => ({ from: 'fastify' }));
    const base = await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      await speaksOpenAI(base);
      expect(await (await fetch(`${base}/hello`)).json()).toEqual({ from: 'fastify' });
      expect((await fetch(`${base}/elsewhere`)).status).toBe(404);
    } finally {
      await app.close();
    }
  });
});
