/**
 * A fake vLLM engine that speaks the disaggregated-prefill protocol as vLLM's NIXL connector does
 * through its toy proxy (docs/proxy.md "Prefill offload"), on the proxy harness's node:http stub:
 *
 * - a request with `kv_transfer_params.do_remote_decode` is a prefill: it must ask for
 *   `max_tokens: 1`, `stream: false` and no `stream_options` (else 400 naming the field), and is
 *   answered with one token and `kv_transfer_params` {do_remote_prefill: true, remote_engine_id:
 *   this engine's id, remote_block_ids, remote_host, remote_port, tp_size}, or misbehaves as told
 *   (`prefill`: a 503, an answer without params, or no answer at all);
 * - a request with `kv_transfer_params.do_remote_prefill` is a decode: its `remote_engine_id` must
 *   name a fake engine of this process (else 400 naming the field); it is served like any request;
 * - any other request is served plainly.
 *
 * Non-streaming answers carry `"kv_transfer_params": null` as vLLM's do (or, with `echo`, the
 * params the request had); with `echo` every SSE chunk carries them too. With `streamForever` a
 * stream never ends: a chunk every few ms until the client goes (the abort tests' engine).
 *
 * Events (`events`): `request` (kind, body) when a request is read, `closed` (kind) when a request
 * the engine still answered was closed by the proxy first.
 */
import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';

import { MODEL, startStub, type StubUpstream } from './proxy-harness.js';

export type PrefillMode = 'ok' | 'status' | 'no_params' | 'hang';
export type RequestKind = 'prefill' | 'decode' | 'plain';

export interface FakeEngineOptions {
  prefill?: PrefillMode;
  echo?: boolean;
  streamForever?: boolean;
}

export interface SeenRequest {
  kind: RequestKind;
  body: Record<string, unknown>;
  url: string;
}

export interface FakeEngine {
  url: string;
  id: string;
  stub: StubUpstream;
  events: EventEmitter;
  seen: SeenRequest[];
  /** The requests of one kind. */
  of(kind: RequestKind): SeenRequest[];
  close(): Promise<void>;
}

/** Engine ids of this process: a decode's remote_engine_id must be one of them. */
const KNOWN = new Set<string>();
let nextId = 0;

const json = (res: ServerResponse, status: number, body: unknown): void => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
};

const badField = (res: ServerResponse, param: string, message: string): void =>
  json(res, 400, { error: { message, type: 'invalid_request_error', param, code: null } });

/** The text an engine answers: who served it and how, so a test can tell the instances apart. */
export const answerText = (id: string, kind: RequestKind): string => `${kind} by ${id}`;

export async function startFakeEngine(options: FakeEngineOptions = {}): Promise<FakeEngine> {
  const id = `fake-engine-${nextId++}`;
  KNOWN.add(id);
  const events = new EventEmitter();
  const seen: SeenRequest[] = [];
  const stub = await startStub((req, res, raw) => {
    const body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
    const params = body.kv_transfer_params as Record<string, unknown> | null | undefined;
    const kind: RequestKind =
      params?.do_remote_decode === true ? 'prefill' : params?.do_remote_prefill === true ? 'decode' : 'plain';
    seen.push({ kind, body, url: req.url ?? '' });
    events.emit('request', kind, body);
    let answered = false;
    res.once('finish', () => (answered = true));
    res.once('close', () => {
      if (!answered) events.emit('closed', kind);
    });
    if (kind === 'prefill') return prefill(res, body, id, options.prefill ?? 'ok');
    if (kind === 'decode' && !KNOWN.has(String(params!.remote_engine_id)))
      return badField(res, 'kv_transfer_params.remote_engine_id', `unknown engine ${String(params!.remote_engine_id)}`);
    serve(res, body, answerText(id, kind), options, kind === 'decode' ? params! : null);
  });
  return {
    url: stub.url,
    id,
    stub,
    events,
    seen,
    of: (kind) => seen.filter((r) => r.kind === kind),
    close: () => stub.close(),
  };
}

function prefill(res: ServerResponse, body: Record<string, unknown>, id: string, mode: PrefillMode): void {
  if (body.max_tokens !== 1) return badField(res, 'max_tokens', 'a prefill must ask for max_tokens 1');
  if ('max_completion_tokens' in body && body.max_completion_tokens !== 1)
    return badField(res, 'max_completion_tokens', 'a prefill must ask for max_completion_tokens 1');
  if (body.stream !== false) return badField(res, 'stream', 'a prefill must not stream');
  if ('stream_options' in body) return badField(res, 'stream_options', 'a prefill has no stream_options');
  if (mode === 'hang') return; // holds the connection until the proxy lets go
  if (mode === 'status')
    return json(res, 503, { error: { message: 'overloaded', type: 'server_error', param: null, code: null } });
  const answer: Record<string, unknown> = completion(body, 'x', 1);
  if (mode === 'ok')
    answer.kv_transfer_params = {
      do_remote_prefill: true,
      do_remote_decode: false,
      remote_engine_id: id,
      remote_block_ids: [3, 4, 5],
      remote_host: '127.0.0.1',
      remote_port: 5600,
      tp_size: 1,
    };
  json(res, 200, answer);
}

/** A non-streaming answer as vLLM writes it (its `kv_transfer_params` null by default). */
function completion(body: Record<string, unknown>, text: string, tokens: number): Record<string, unknown> {
  const chat = Array.isArray(body.messages);
  return {
    id: 'cmpl-fake',
    object: chat ? 'chat.completion' : 'text_completion',
    created: 0,
    model: MODEL,
    choices: [
      chat
        ? { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' }
        : { index: 0, text, finish_reason: 'stop' },
    ],
    usage: {
      prompt_tokens: 40,
      completion_tokens: tokens,
      total_tokens: 40 + tokens,
      prompt_tokens_details: { cached_tokens: 32 },
    },
    kv_transfer_params: null,
  };
}

function serve(
  res: ServerResponse,
  body: Record<string, unknown>,
  text: string,
  options: FakeEngineOptions,
  params: Record<string, unknown> | null,
): void {
  const echo = options.echo === true ? params : null;
  if (body.stream !== true) {
    const answer = completion(body, text, 3);
    answer.kv_transfer_params = echo;
    return json(res, 200, answer);
  }
  const chat = Array.isArray(body.messages);
  const chunk = (piece: string): string => {
    const choice = chat ? { index: 0, delta: { content: piece } } : { index: 0, text: piece };
    const event: Record<string, unknown> = {
      id: 'cmpl-fake',
      object: chat ? 'chat.completion.chunk' : 'text_completion',
      model: MODEL,
      choices: [choice],
    };
    if (echo !== null) event.kv_transfer_params = echo;
    return `data: ${JSON.stringify(event)}\n\n`;
  };
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  if (options.streamForever === true) {
    const timer = setInterval(() => res.write(chunk('.')), 5);
    res.once('close', () => clearInterval(timer));
    res.write(chunk(text));
    return;
  }
  for (const piece of text.split(' ')) res.write(chunk(`${piece} `));
  res.end('data: [DONE]\n\n');
}
