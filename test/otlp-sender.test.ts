/**
 * The OTLP/HTTP sender (src/proxy/observe/otlp-sender.ts) against a local receiver: encoded chunks
 * of requests' spans arrive as one protobuf body, and a chunk's buffer is recycled once a body
 * holds its bytes (so the next chunk is written into the same memory, not a new allocation).
 */
import { createServer, type Server } from 'node:http';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { encodeRequestSpans } from '../src/proxy/observe/otlp-proto.js';
import { otlpSender } from '../src/proxy/observe/otlp-sender.js';
import { RequestTrace } from '../src/proxy/observe/request-trace.js';
import { parentFromHeaders } from '../src/proxy/observe/trace-context.js';
import { decodeTraceRequest, type DecodedSpan } from './helpers/otlp-decode.js';

function endedTrace(model: string): RequestTrace {
  const t = new RequestTrace(() => {}, parentFromHeaders('', ''), 'POST', '/v1/chat/completions');
  t.model(model);
  t.attempt('http://127.0.0.1:8000');
  t.end(200, 'success', { prompt_tokens: 10, cached_tokens: 0 }, undefined);
  return t;
}

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

  it('sends chunks as one body, then writes the next chunk into a recycled buffer', async () => {
    const warnings: string[] = [];
    const sender = otlpSender(url, { resource: {}, scopeName: 'kvroute', scopeVersion: '0' }, (w) => warnings.push(w));
    const first = encodeRequestSpans([endedTrace('a'), endedTrace('b')], sender.allocateChunk);
    const second = encodeRequestSpans([endedTrace('c')], sender.allocateChunk);
    expect(second.buffer).not.toBe(first.buffer); // both wait for the batch: two buffers
    await sender.send([first, second]);
    const models = received
      .at(-1)!
      .filter((s) => s.kind === 2)
      .map((s) => s.attributes.find((a) => a.key === 'gen_ai.request.model')!.value.stringValue);
    expect(models).toEqual(['a', 'b', 'c']);
    const third = encodeRequestSpans([endedTrace('d')], sender.allocateChunk);
    expect([first.buffer, second.buffer]).toContain(third.buffer);
    await sender.shutdown();
    expect(warnings).toEqual([]);
  });
});
