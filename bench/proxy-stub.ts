/**
 * The stub backend of the proxy benchmark (issue #6): a minimal OpenAI-compatible upstream, fast
 * enough that it is never what a proxy's figure measures.
 *
 *   node --import tsx bench/proxy-stub.ts [--impl uws|http] [--ports N] [--chunks N]
 *                                         [--chunk-delay-ms MS]
 *
 * - `POST /v1/chat/completions`, `POST /v1/completions`: the body is read whole; without
 *   `"stream": true` the answer is a fixed ~300-byte JSON completion with `usage`; with it, an SSE
 *   stream of `--chunks` content chunks (default 16; the last carries `finish_reason`), then the
 *   usage chunk (`choices: []`), then `data: [DONE]`. With `--chunk-delay-ms` > 0 the chunks are
 *   written that far apart (timers, one HTTP chunk each); otherwise the whole stream is one HTTP
 *   chunk, so that every leg hands the client the same framing (nginx coalesces what arrives in
 *   one read into one chunk, and parsing 18 chunks instead of 1 costs the client more than
 *   relaying costs a proxy).
 * - `GET /health`, `GET /v1/models`, `GET /metrics` (vLLM's gauge names, all zero), so a proxy's
 *   health checks and scrapes find a well-behaved engine; anything else is a 404.
 * - `--ports N` listens on N loopback ports in the one process (default 1), so a proxy can be
 *   given N backends without N processes on a 2-core machine.
 *
 * Server: uWebSockets.js (the default), the faster here. Measured on the 2-core bench machine on
 * 2026-11-30, autocannon at 64 connections straight to one stub port, two rounds under other
 * sessions' load: uWS 15.6k–38.4k req/s non-streaming at 21–29 µs of stub CPU per request
 * (streaming 33–46 µs), node:http 7.4k–10.1k req/s at 58–82 µs (streaming 85–112 µs). `--impl http`
 * keeps the node:http variant for that comparison.
 *
 * Prints one line `proxy-stub: listening on 127.0.0.1:P1[,P2...]` when ready; SIGTERM or SIGINT
 * closes the listeners and exits 0. Loopback only.
 */
import http from 'node:http';
import { parseArgs } from 'node:util';

import uWS from 'uWebSockets.js';

const CREATED = 1_764_460_800;
const PROMPT_TOKENS = 1024;

type Kind = 'chat' | 'completion';
interface Config {
  chunks: number;
  chunkDelayMs: number;
}
/** Everything a response writes, built once: the stub does no JSON work per request. */
interface Canned {
  json: string;
  chunks: string[];
  tail: string;
  /** The whole stream, for a stream written at once. */
  whole: string;
}

function canned(kind: Kind, chunks: number): Canned {
  const chat = kind === 'chat';
  const id = chat ? 'chatcmpl-stub' : 'cmpl-stub';
  const usage = { prompt_tokens: PROMPT_TOKENS, completion_tokens: chunks, total_tokens: PROMPT_TOKENS + chunks };
  const head = { id, object: chat ? 'chat.completion.chunk' : 'text_completion', created: CREATED, model: 'stub' };
  const choice = (finish: string | null) =>
    chat
      ? { index: 0, delta: { content: ' tok' }, finish_reason: finish }
      : { index: 0, text: ' tok', logprobs: null, finish_reason: finish };
  const event = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
  const text = ' tok'.repeat(chunks);
  const events = Array.from({ length: chunks }, (_, i) =>
    event({ ...head, choices: [choice(i === chunks - 1 ? 'stop' : null)] }),
  );
  const tail = `${event({ ...head, choices: [], usage })}data: [DONE]\n\n`;
  return {
    json: JSON.stringify({
      id,
      object: chat ? 'chat.completion' : 'text_completion',
      created: CREATED,
      model: 'stub',
      choices: [
        chat
          ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }
          : { index: 0, text, logprobs: null, finish_reason: 'stop' },
      ],
      usage: { ...usage, prompt_tokens_details: { cached_tokens: 0 } },
    }),
    chunks: events,
    tail,
    whole: events.join('') + tail,
  };
}

const MODELS = JSON.stringify({
  object: 'list',
  data: [{ id: 'stub', object: 'model', created: CREATED, owned_by: 'stub' }],
});
const METRICS = [
  'vllm:num_requests_running{model_name="stub"} 0',
  'vllm:num_requests_waiting{model_name="stub"} 0',
  'vllm:kv_cache_usage_perc{model_name="stub"} 0',
  '',
].join('\n');
const STREAM_MARKS = [Buffer.from('"stream":true'), Buffer.from('"stream": true')];
const wantsStream = (body: Buffer) => STREAM_MARKS.some((mark) => body.includes(mark));

/** The uWebSockets.js server: one App listening on every port. */
function serveUws(config: Config, ports: number, ready: (ports: number[]) => void): () => void {
  const answers = { chat: canned('chat', config.chunks), completion: canned('completion', config.chunks) };
  const app = uWS.App();
  const post = (kind: Kind) => (res: uWS.HttpResponse) => {
    let aborted = false;
    res.onAborted(() => {
      aborted = true;
    });
    const parts: Buffer[] = [];
    res.onData((chunk, isLast) => {
      parts.push(Buffer.from(chunk.slice(0))); // the chunk is invalid once this callback returns
      if (!isLast) return;
      const answer = answers[kind];
      if (!wantsStream(parts.length === 1 ? parts[0]! : Buffer.concat(parts))) {
        res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(answer.json));
        return;
      }
      res.cork(() => {
        res
          .writeStatus('200 OK')
          .writeHeader('content-type', 'text/event-stream')
          .writeHeader('cache-control', 'no-cache');
        if (config.chunkDelayMs > 0) return void res.write(answer.chunks[0]!);
        res.write(answer.whole);
        res.end();
      });
      if (config.chunkDelayMs === 0) return;
      let next = 1;
      const timer = setInterval(() => {
        if (aborted) return void clearInterval(timer);
        res.cork(() => {
          if (next < answer.chunks.length) res.write(answer.chunks[next++]!);
          else {
            clearInterval(timer);
            res.end(answer.tail);
          }
        });
      }, config.chunkDelayMs);
    });
  };
  app.post('/v1/chat/completions', post('chat'));
  app.post('/v1/completions', post('completion'));
  app.get('/health', (res) => void res.end());
  app.get('/v1/models', (res) => void res.writeHeader('content-type', 'application/json').end(MODELS));
  app.get('/metrics', (res) => void res.writeHeader('content-type', 'text/plain; version=0.0.4').end(METRICS));
  app.any('/*', (res) => void res.writeStatus('404 Not Found').end());
  const sockets: uWS.us_listen_socket[] = [];
  const listen = () => {
    if (sockets.length === ports) return ready(sockets.map((s) => uWS.us_socket_local_port(s)));
    app.listen('127.0.0.1', 0, (socket) => {
      if (!socket) throw new Error('proxy-stub: uWS could not listen on 127.0.0.1');
      sockets.push(socket);
      listen();
    });
  };
  listen();
  return () => sockets.forEach((s) => uWS.us_listen_socket_close(s));
}

/** The node:http server, for comparison: one http.Server per port. */
function serveHttp(config: Config, ports: number, ready: (ports: number[]) => void): () => void {
  const answers = { chat: canned('chat', config.chunks), completion: canned('completion', config.chunks) };
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const kind: Kind | undefined =
      req.url === '/v1/chat/completions' ? 'chat' : req.url === '/v1/completions' ? 'completion' : undefined;
    if (req.method === 'GET' && req.url === '/health') return void res.end();
    if (req.method === 'GET' && req.url === '/v1/models')
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(MODELS);
    if (req.method === 'GET' && req.url === '/metrics')
      return void res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(METRICS);
    if (req.method !== 'POST' || kind === undefined) return void res.writeHead(404).end();
    const parts: Buffer[] = [];
    req.on('data', (chunk: Buffer) => parts.push(chunk));
    req.on('end', () => {
      const answer = answers[kind];
      if (!wantsStream(Buffer.concat(parts)))
        return void res.writeHead(200, { 'content-type': 'application/json' }).end(answer.json);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      if (config.chunkDelayMs === 0) {
        res.write(answer.whole);
        return void res.end();
      }
      let next = 0;
      const timer = setInterval(() => {
        if (res.destroyed) return void clearInterval(timer);
        if (next < answer.chunks.length) res.write(answer.chunks[next++]!);
        else {
          clearInterval(timer);
          res.end(answer.tail);
        }
      }, config.chunkDelayMs);
      res.write(answer.chunks[next++]!);
    });
  };
  const servers = Array.from({ length: ports }, () => {
    const server = http.createServer({ keepAliveTimeout: 120_000 }, handler);
    server.keepAliveTimeout = 120_000;
    return server;
  });
  let listening = 0;
  for (const server of servers)
    server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 }, () => {
      if (++listening === ports) ready(servers.map((s) => (s.address() as { port: number }).port));
    });
  return () => servers.forEach((s) => s.close());
}

const { values } = parseArgs({
  options: {
    impl: { type: 'string', default: 'uws' },
    ports: { type: 'string', default: '1' },
    chunks: { type: 'string', default: '16' },
    'chunk-delay-ms': { type: 'string', default: '0' },
  },
});
const config: Config = { chunks: Number(values.chunks), chunkDelayMs: Number(values['chunk-delay-ms']) };
const ports = Number(values.ports);
if (!(Number.isInteger(config.chunks) && config.chunks >= 1) || !(config.chunkDelayMs >= 0) || !(ports >= 1)) {
  console.error('proxy-stub: --chunks and --ports take integers >= 1, --chunk-delay-ms a number >= 0');
  process.exit(2);
}
if (values.impl !== 'uws' && values.impl !== 'http') {
  console.error(`proxy-stub: --impl is uws or http, not ${values.impl}`);
  process.exit(2);
}
const close = (values.impl === 'uws' ? serveUws : serveHttp)(config, ports, (bound) =>
  console.log(`proxy-stub: listening on ${bound.map((p) => `127.0.0.1:${p}`).join(',')}`),
);
for (const signal of ['SIGTERM', 'SIGINT'] as const)
  process.on(signal, () => {
    close();
    process.exit(0);
  });
