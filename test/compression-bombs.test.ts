/**
 * Compression bombs against the body budget (--max-body-memory) and the body cap (--max-body):
 * a body of a few hundred compressed bytes that inflates to megabytes is stopped by its decoder
 * within one chunk of the cap, in every coding the proxy decodes, and the budget counts the
 * decoded bytes as they appear. Concurrent bombs fill the budget and no further; after each round
 * every byte is given back and no decoder is left running. The accounting is read from the
 * budget itself (a spy on reserve), never from RSS.
 */
import { brotliCompressSync, constants, deflateSync, gzipSync } from 'node:zlib';

import { afterEach, describe, expect, it } from 'vitest';

import type { BodyBudget } from '../src/proxy/exchange/body-budget.js';
import { CHUNK_BYTES, decodersRunning } from '../src/proxy/exchange/request-encoding.js';
import { MODEL, post, scopedRigs } from './helpers/proxy-harness.js';

const rigs = scopedRigs();
afterEach(() => rigs.closeAll());

type ErrorReply = { error: { code: string; message: string } };

const MIB = 2 ** 20;
/** Brotli at a quality that compresses a bomb in milliseconds (the default, 11, takes seconds). */
const brotli = (b: Buffer) => brotliCompressSync(b, { params: { [constants.BROTLI_PARAM_QUALITY]: 4 } });
const ENCODERS: Array<[string, (b: Buffer) => Buffer]> = [
  ['gzip', gzipSync],
  ['deflate', deflateSync],
  ['br', brotli],
];

/** A chat body whose JSON is about `bytes` long, nearly all of it one repeated letter. */
function bigChat(bytes: number): Buffer {
  return Buffer.from(JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'x'.repeat(bytes) }] }));
}

/** Records the most the budget held at once, and every amount reserved. */
function watch(budget: BodyBudget): { peak: number; reserved: number[] } {
  const seen = { peak: 0, reserved: [] as number[] };
  const reserve = budget.reserve.bind(budget);
  budget.reserve = (bytes: number) => {
    const ok = reserve(bytes);
    if (ok) {
      seen.reserved.push(bytes);
      seen.peak = Math.max(seen.peak, budget.held);
    }
    return ok;
  };
  return seen;
}

/** Polls `predicate` every 10 ms for up to `ms`; fails naming `what`. */
async function until(predicate: () => boolean, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.each(['uws', 'node'] as const)('compression bombs (%s server)', (http) => {
  const bodyServer = async (maxBodyBytes: number, maxBodyMemoryBytes: number) => {
    const upstream = await rigs.stub((_req, res) =>
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
    );
    const rig = await rigs.proxyFor({ backends: [upstream.url], http, maxBodyBytes, maxBodyMemoryBytes });
    return { upstream, rig, budget: rig.proxy.state.bodies };
  };

  it.each(ENCODERS)(
    'a %s bomb gets 413 naming --max-body; its decoder stops within a chunk of the cap',
    async (coding, encode) => {
      const { upstream, rig, budget } = await bodyServer(MIB, 8 * MIB);
      const seen = watch(budget);
      const bomb = encode(bigChat(16 * MIB));
      expect(bomb.length).toBeLessThan(64 * 1024);
      const response = await post(rig.base, '/v1/chat/completions', bomb, { 'content-encoding': coding });
      expect(response.status).toBe(413);
      const reply = (await response.json()) as ErrorReply;
      expect(reply.error.code).toBe('body_too_large');
      expect(reply.error.message).toBe(`the decoded request body exceeds --max-body (${MIB} bytes)`);
      // Decoded bytes were paid for as they appeared, and the decoder stopped at the cap: never
      // more than the cap and the compressed body held at once, however far the bomb would inflate.
      expect(seen.peak).toBeGreaterThan(MIB - CHUNK_BYTES);
      expect(seen.peak).toBeLessThanOrEqual(MIB + bomb.length);
      expect(Math.max(...seen.reserved.slice(1))).toBeLessThanOrEqual(CHUNK_BYTES);
      expect(budget.held).toBe(0);
      await until(() => decodersRunning() === 0, 'the decoder to close');
      expect(upstream.requests).toEqual([]);
    },
  );

  it('a compressed body under the caps is decoded whole, and holds its decoded size while in flight', async () => {
    let release: () => void = () => {};
    let arrived: () => void = () => {};
    const upstreamSaw = new Promise<void>((resolve) => (arrived = resolve));
    const upstream = await rigs.stub((_req, res) => {
      release = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      arrived();
    });
    const rig = await rigs.proxyFor({
      backends: [upstream.url],
      http,
      maxBodyBytes: 4 * MIB,
      maxBodyMemoryBytes: 8 * MIB,
    });
    const json = bigChat(3 * MIB);
    const pending = post(rig.base, '/v1/chat/completions', brotli(json), { 'content-encoding': 'br' });
    await upstreamSaw;
    expect(rig.proxy.state.bodies.held).toBe(json.length); // the compressed bytes' share was given back
    release();
    expect((await pending).status).toBe(200);
    expect(upstream.requests[0]!.body.equals(json)).toBe(true);
    expect(rig.proxy.state.bodies.held).toBe(0);
  });

  it('40 concurrent brotli bombs, three rounds: the budget fills to its limit, no further, and empties after each', async () => {
    const limit = 4 * MIB;
    const { upstream, budget, rig } = await bodyServer(MIB, limit);
    const bomb = brotli(bigChat(16 * MIB));
    expect(bomb.length).toBeLessThan(4096);
    for (let round = 1; round <= 3; round++) {
      const seen = watch(budget);
      const responses = await Promise.all(
        Array.from({ length: 40 }, () =>
          post(rig.base, '/v1/chat/completions', bomb, { 'content-encoding': 'br' }).then(async (r) => ({
            status: r.status,
            reply: (await r.json()) as ErrorReply,
          })),
        ),
      );
      for (const { status, reply } of responses) {
        if (status === 413) expect(reply.error.message).toMatch(/--max-body \(1048576 bytes\)/);
        else {
          expect(status).toBe(503);
          expect(reply.error.code).toBe('body_budget_exceeded');
          expect(reply.error.message).toMatch(/--max-body-memory \(4194304 bytes\)/);
        }
      }
      // The decoded bytes were counted as they appeared (more than one bomb's cap at once: the
      // decoders overlapped), and the budget never passed its limit.
      expect(seen.peak).toBeLessThanOrEqual(limit);
      expect(seen.peak).toBeGreaterThan(MIB);
      expect(budget.held, `round ${round}`).toBe(0);
      await until(() => decodersRunning() === 0, `round ${round}'s decoders to close`);
    }
    expect(upstream.requests).toEqual([]);
  });
});
