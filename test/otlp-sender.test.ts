/**
 * The OTLP/HTTP sender (src/proxy/observe/otlp-sender.ts) and the body builder (otlp-body.ts)
 * against a local receiver: chunks of requests' spans encoded straight into a body arrive as one
 * protobuf request, equal to the one otlpProtoBody makes of the same chunks; a body that outgrows
 * its buffer moves whole; bodies sent together are merged; a body's buffer is recycled once its
 * export ended (the next body is written into the same memory, not a new allocation).
 */
import { createServer, type Server } from 'node:http';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { OtlpBodyBuilder, type BufferPool } from '../src/proxy/observe/otlp-body.js';
import { otlpProtoBody } from '../src/proxy/observe/otlp-proto.js';
import { otlpSender } from '../src/proxy/observe/otlp-sender.js';
import { RequestTrace } from '../src/proxy/observe/request-trace.js';
import { parentFromHeaders } from '../src/proxy/observe/trace-context.js';
import { decodeTraceRequest, type DecodedSpan } from './helpers/otlp-decode.js';

const ENVELOPE = { resource: { 'service.name': 'kvroute' }, scopeName: 'kvroute', scopeVersion: '0' };

function endedTrace(model: string): RequestTrace {
  const t = new RequestTrace(() => {}, parentFromHeaders('', ''), 'POST', '/v1/chat/completions');
  t.model(model);
  t.attempt('http://127.0.0.1:8000');
  t.end(200, 'success', { prompt_tokens: 10, cached_tokens: 0 }, undefined);
  return t;
}

const models = (spans: DecodedSpan[]) =>
  spans
    .filter((s) => s.kind === 2)
    .map((s) => s.attributes.find((a) => a.key === 'gen_ai.request.model')!.value.stringValue);

/** Fills a body with chunks of the given models, as the tracer does; returns it finished. */
function bodyOf(builder: OtlpBodyBuilder, chunks: string[][]) {
  for (const chunk of chunks) builder.encode(chunk.map(endedTrace));
  return builder.finish()!;
}

describe('the OTLP body builder', () => {
  it('writes the envelope before the spans: the same request otlpProtoBody makes of the chunks', () => {
    const pool: BufferPool = { allocate: (bytes) => Buffer.alloc(bytes), release: () => {} };
    const builder = new OtlpBodyBuilder(ENVELOPE, pool);
    expect(builder.finish()).toBeUndefined();
    const body = bodyOf(builder, [['a', 'b'], ['c']]);
    expect(body.requests).toBe(3);
    const ours = decodeTraceRequest(body.bytes);
    expect(models(ours.spans)).toEqual(['a', 'b', 'c']);
    const copied = decodeTraceRequest(otlpProtoBody([body.spans], ENVELOPE));
    expect(ours).toEqual(copied);
    expect(builder.finish()).toBeUndefined(); // the next chunk starts a new body
  });

  it('moves a body that outgrows its buffer into one twice as large, spans intact', () => {
    const released: Buffer[] = [];
    const sizes: number[] = [];
    const pool: BufferPool = {
      allocate: (bytes) => {
        sizes.push(bytes);
        return Buffer.alloc(bytes);
      },
      release: (b) => released.push(b),
    };
    const builder = new OtlpBodyBuilder(ENVELOPE, pool);
    // 480 requests of ~2.3 kB (a 2,000-character model each): past the first buffer's megabyte.
    const chunks = Array.from({ length: 60 }, (_, c) =>
      Array.from({ length: 8 }, (_, i) => `m${c}-${i}-${'x'.repeat(2000)}`),
    );
    const body = bodyOf(builder, chunks);
    expect(sizes.length).toBeGreaterThan(1); // it grew
    expect(released).toHaveLength(sizes.length - 1);
    expect(models(decodeTraceRequest(body.bytes).spans)).toEqual(chunks.flat());
  });
});

describe('the OTLP sender', () => {
  let server: Server;
  let url = '';
  const received: DecodedSpan[][] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push(decodeTraceRequest(Buffer.concat(chunks)).spans);
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as { port: number }).port}/v1/traces`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('sends a body as it is, merges bodies sent together, and reuses a buffer once its export ended', async () => {
    const warnings: string[] = [];
    const sender = otlpSender(url, ENVELOPE, (w) => warnings.push(w));
    const builder = new OtlpBodyBuilder(ENVELOPE, sender.buffers);
    const first = bodyOf(builder, [['a', 'b']]);
    await sender.send([first]);
    expect(models(received.at(-1)!)).toEqual(['a', 'b']);
    const second = bodyOf(builder, [['c']]);
    expect(second.buffer).toBe(first.buffer); // released when its export ended
    const third = bodyOf(builder, [['d'], ['e']]);
    expect(third.buffer).not.toBe(second.buffer); // the second is still in use
    await sender.send([second, third]);
    expect(models(received.at(-1)!)).toEqual(['c', 'd', 'e']);
    await sender.shutdown();
    expect(warnings).toEqual([]);
  });
});
