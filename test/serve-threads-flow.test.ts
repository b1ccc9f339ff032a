/**
 * Flow control under `kvroute serve --threads 2` (docs/flow-control.md "Threads"): the process
 * has one `--max-in-flight` and one queue, whichever thread a connection lands on. Checked end to
 * end against an engine stub that holds every request until the test answers it: never more than
 * the limit upstream at once, over both threads; the waiters of both threads admitted in the one
 * queue's fair order (a quiet tenant's request ahead of a flood's backlog); a waiter past its
 * deadline refused with 429 whichever thread holds it.
 */
import { request as httpRequest } from 'node:http';
import type { ServerResponse } from 'node:http';

import { afterEach, describe, expect, it } from 'vitest';

import { MODEL, startStub, type StubUpstream } from './helpers/proxy-harness.js';
import { startServe, type ServeChild } from './helpers/proxy-serve-child.js';
import { waitFor } from './helpers/wait-for.js';

const TOKEN = 'threads-flow-admin-token';

/** A completion request on a fresh connection (no keep-alive), so the kernel picks its thread. */
function complete(
  base: string,
  tag: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; retryAfter: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: tag }] });
    const req = httpRequest(
      `${base}/v1/chat/completions`,
      {
        method: 'POST',
        agent: false,
        headers: { connection: 'close', 'content-type': 'application/json', ...headers },
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () =>
          resolve({ status: res.statusCode!, retryAfter: res.headers['retry-after'] as string | undefined, body }),
        );
      },
    );
    req.on('error', reject);
    req.setTimeout(20_000, () => req.destroy(new Error(`${tag} timed out`)));
    req.end(payload);
  });
}

interface Rig {
  serve: ServeChild;
  stub: StubUpstream;
  held: Array<{ tag: string; res: ServerResponse }>;
  /** The most requests the engine held at once. */
  peak: () => number;
  answerOldest(): void;
  queued(): Promise<number>;
}

let open: Rig | undefined;

async function rig(maxInFlight: number): Promise<Rig> {
  const held: Rig['held'] = [];
  let peak = 0;
  const stub = await startStub((_req, res, body) => {
    const tag = (JSON.parse(body.toString()) as { messages: Array<{ content: string }> }).messages[0]!.content;
    held.push({ tag, res });
    peak = Math.max(peak, held.length);
  });
  const serve = await startServe([
    '--threads',
    '2',
    '--port',
    '0',
    '--backends',
    stub.url,
    '--max-in-flight',
    String(maxInFlight),
    '--admin-token',
    TOKEN,
  ]);
  open = {
    serve,
    stub,
    held,
    peak: () => peak,
    answerOldest: () =>
      held
        .shift()!
        .res.writeHead(200, { 'content-type': 'application/json' })
        .end('{"choices":[],"usage":{"completion_tokens":1}}'),
    queued: async () => {
      const res = await fetch(`${serve.base}/admin/flow`, { headers: { authorization: `Bearer ${TOKEN}` } });
      return ((await res.json()) as { queued: number }).queued;
    },
  };
  return open;
}

afterEach(async () => {
  if (open === undefined) return;
  while (open.held.length > 0) open.answerOldest();
  await open.serve.stop();
  await open.stub.close();
  open = undefined;
});

describe('kvroute serve --threads 2 --max-in-flight', () => {
  it('holds the whole process to the limit, and admits every waiter of both threads as slots come back', async () => {
    // One slot for the process: a queue per thread (each with a share of the limit) would let
    // both threads hold one.
    const r = await rig(1);
    const all = Array.from({ length: 8 }, (_, k) => complete(r.serve.base, `r${k}`));
    await waitFor(
      '1 request upstream and 7 in the one queue',
      async () => r.held.length === 1 && (await r.queued()) === 7,
    );
    for (let answered = 0; answered < 8; answered++) {
      await waitFor(`a request upstream (${answered} answered)`, () => r.held.length > 0);
      r.answerOldest();
    }
    const results = await Promise.all(all);
    expect(results.map((x) => x.status)).toEqual(Array(8).fill(200));
    expect(r.peak()).toBe(1);
    expect(new Set(r.stub.requests.map((q) => q.body.toString())).size).toBe(8);
  });

  it('puts a quiet tenant ahead of a flood’s backlog whichever thread each request came in on', async () => {
    const r = await rig(1);
    const first = complete(r.serve.base, 'first', { 'x-kvroute-tenant': 'noisy' });
    await waitFor('the first request upstream', () => r.held.length === 1);
    const flood = Array.from({ length: 8 }, (_, k) =>
      complete(r.serve.base, `noisy ${k}`, { 'x-kvroute-tenant': 'noisy' }),
    );
    await waitFor('the flood queued', async () => (await r.queued()) === 8);
    const quiet = complete(r.serve.base, 'quiet', { 'x-kvroute-tenant': 'quiet' });
    await waitFor('the quiet request queued', async () => (await r.queued()) === 9);
    const order: string[] = [];
    for (let k = 0; k < 10; k++) {
      await waitFor(`request ${k} upstream`, () => r.held.length > 0);
      order.push(r.held[0]!.tag);
      r.answerOldest();
    }
    await Promise.all([first, quiet, ...flood]);
    // The flood's oldest goes first (both tenants start even), then the quiet tenant: one FIFO
    // (or a queue per thread) would put it last, behind the flood.
    expect(order.indexOf('quiet')).toBeLessThanOrEqual(2);
  });

  it('refuses a waiter past its deadline with 429 queue_timeout and Retry-After, from either thread', async () => {
    const r = await rig(1);
    const first = complete(r.serve.base, 'first');
    await waitFor('the first request upstream', () => r.held.length === 1);
    const late = await Promise.all(
      Array.from({ length: 4 }, (_, k) => complete(r.serve.base, `late ${k}`, { 'x-kvroute-deadline-ms': '200' })),
    );
    for (const res of late) {
      expect(res.status).toBe(429);
      expect(Number(res.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(res.body)).toMatchObject({ error: { code: 'queue_timeout' } });
    }
    expect(await r.queued()).toBe(0);
    r.answerOldest();
    expect((await first).status).toBe(200);
    expect(r.peak()).toBe(1);
  });
});
