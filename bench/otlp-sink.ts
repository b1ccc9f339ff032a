/**
 * The tracing bench's OTLP/HTTP collector (bench/tracing.ts), in a process of its own, as a
 * collector is: in the load generator's event loop, its reading of each megabyte batch stalled the
 * load and so changed the servers' CPU per request. It answers POST /v1/traces with 200 and counts
 * the spans (protobuf: resource_spans → scope_spans → spans); GET /spans answers the count.
 *
 *   node --import tsx bench/otlp-sink.ts     (prints "otlp sink listening on PORT")
 */
import { createServer } from 'node:http';

import { protoFields } from '../src/proxy/observe/otlp-proto-read.js';

/** The spans of an OTLP/HTTP protobuf request: resource_spans (1) → scope_spans (2) → spans (2). */
function countSpans(body: Uint8Array): number {
  let spans = 0;
  const inside = (bytes: Uint8Array, field: number, then: (b: Uint8Array) => void) =>
    protoFields(bytes, (f, v) => {
      if (f === field && typeof v !== 'number') then(v);
    });
  inside(body, 1, (rs) => inside(rs, 2, (ss) => inside(ss, 2, () => spans++)));
  return spans;
}

let spans = 0;
const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/spans') {
    res.writeHead(200, { 'content-type': 'text/plain' }).end(String(spans));
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    spans += countSpans(Buffer.concat(chunks));
    res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
server.listen(0, '127.0.0.1', () =>
  console.log(`otlp sink listening on ${(server.address() as { port: number }).port}`),
);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
