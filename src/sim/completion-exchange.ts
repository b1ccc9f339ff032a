/**
 * One completion request on the wire: submits it to the real-time engine and writes its tokens
 * as they are delivered, as an SSE stream or, at the end, one JSON response.
 *
 * Disconnect: the response's `close` event (the client went away, streaming or not) cancels the
 * request inside the engine, which frees its blocks and drops it from the running and waiting
 * counts at once; no token is written after it.
 *
 * Disaggregated prefill (docs/sim-serve.md): with `remoteDecode` (the prefill phase) the engine
 * keeps the request's blocks at its finish and the JSON response carries the `kv_transfer_params`
 * `remoteDecode` returns for them; a client gone before then leaves nothing held. With
 * `transferred` (the decode phase) the request enters the engine holding its prompt's KV,
 * `cached_tokens` counts the transferred tokens with the engine's own cache hit, and TTFT and
 * E2E are measured from the request's arrival, before the transfer wait.
 *
 * Backpressure: chunks are tiny and a step yields one token per request, so a slow reader only
 * buffers; the engine is not paused for it (vLLM does not pause generation for a slow client).
 */
import type { ServerResponse } from 'node:http';

import {
  messagesBody,
  messagesStream,
  responsesBody,
  responsesStream,
  type ApiAnswerHead,
  type ApiStream,
  type PromptUsage,
} from './api-answers.js';
import type { CompletionRequest } from './completion-request.js';
import {
  completionResponse,
  streamChunk,
  TOKEN_TEXT,
  usage,
  usageChunk,
  type ResponseHead,
} from './completion-response.js';
import type { EngineMetrics } from './engine-metrics.js';
import type { Sequence } from './engine-model.js';
import type { RemoteDecodeParams } from './kv-transfer-params.js';
import type { Generation, GenerationListener, RealtimeEngine } from './realtime-engine.js';

export interface ExchangeContext {
  realtime: RealtimeEngine;
  metrics: EngineMetrics;
}

export interface ExchangeOptions {
  /** The prefill phase: holds the finished request's blocks and returns the params to answer with. */
  remoteDecode?: (sequence: Sequence) => RemoteDecodeParams;
  /** The decode phase: the prompt's KV arrived by transfer; the request arrived at `arrivedAt` (engine s). */
  transferred?: { arrivedAt: number };
}

export class CompletionExchange implements GenerationListener {
  private generation: Generation | undefined;
  private generated = 0;
  private lastTokenAt = 0;
  /** The Messages or Responses stream writer, for a streamed request on those routes. */
  private readonly apiStream: ApiStream | undefined;
  /** What the Messages and Responses answers share (their id, time, model, output cap). */
  private readonly apiHead: ApiAnswerHead;

  constructor(
    private readonly res: ServerResponse,
    private readonly request: CompletionRequest,
    private readonly head: ResponseHead,
    private readonly requestId: number,
    private readonly context: ExchangeContext,
    private readonly options: ExchangeOptions = {},
  ) {
    this.apiHead = { id: head.id, created: head.created, model: head.model, maxTokens: request.maxTokens };
    if (request.stream && request.api === 'messages') this.apiStream = messagesStream(this.apiHead);
    else if (request.stream && request.api === 'responses') this.apiStream = responsesStream(this.apiHead);
  }

  /** The prompt's tokens and those the engine served from its cache (or received by transfer). */
  private promptUsage(sequence: Sequence): PromptUsage {
    const cached = (sequence.cachedTokens ?? 0) + sequence.transferredTokens;
    return { prompt: this.request.inputTokens, cached, output: this.generated };
  }

  /** When the request's latency starts: its arrival, before any transfer wait. */
  private arrivedAt(sequence: Sequence): number {
    return this.options.transferred?.arrivedAt ?? sequence.submittedAt;
  }

  /** Submits the request, unless the client is already gone. */
  start(): void {
    const { res, request } = this;
    if (res.destroyed || res.socket === null || res.socket.destroyed) return;
    if (request.stream) {
      res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache' });
      res.flushHeaders();
    }
    this.generation = this.context.realtime.submit(
      {
        id: this.requestId,
        hashIds: request.hashIds,
        ...(request.tokens === undefined ? {} : { tokens: request.tokens }),
        inputLength: request.inputTokens,
        outputLength: request.maxTokens,
        ...(this.options.remoteDecode === undefined ? {} : { holdBlocks: true }),
        ...(this.options.transferred === undefined ? {} : { transferred: true }),
      },
      this,
    );
    // Registered synchronously after submit: `close` is emitted asynchronously, so none is missed.
    res.once('close', () => this.generation?.cancel());
  }

  tokens(count: number, at: number): void {
    const sequence = this.generation!.sequence;
    const { metrics } = this.context;
    for (let i = 0; i < count; i++) {
      if (this.generated === 0) metrics.firstToken(at - this.arrivedAt(sequence));
      else metrics.interToken(i === 0 ? at - this.lastTokenAt : 0);
      this.generated++;
      if (!this.request.stream || this.res.destroyed) continue;
      if (this.apiStream !== undefined) {
        if (this.generated === 1) this.res.write(this.apiStream.begin(this.promptUsage(sequence)));
        this.res.write(this.apiStream.token());
        continue;
      }
      if (this.generated === 1 && this.head.endpoint === 'chat')
        this.send(
          streamChunk(this.head, '', { first: true, finishReason: null, includeUsage: this.request.includeUsage }),
        );
      const last = this.generated >= this.request.maxTokens;
      this.send(
        streamChunk(this.head, TOKEN_TEXT, {
          first: false,
          finishReason: last ? 'length' : null,
          includeUsage: this.request.includeUsage,
        }),
      );
    }
    this.lastTokenAt = at;
  }

  finished(at: number): void {
    const sequence = this.generation!.sequence;
    this.context.metrics.finished(at - this.arrivedAt(sequence));
    const cached = (sequence.cachedTokens ?? 0) + sequence.transferredTokens;
    const totals = usage(this.request.inputTokens, this.generated, cached);
    const { res } = this;
    if (res.destroyed) {
      this.context.realtime.releaseHeld(sequence); // nobody will pull a prefill nobody received
      return;
    }
    if (this.apiStream !== undefined) {
      res.end(this.apiStream.end(this.promptUsage(sequence)));
      return;
    }
    if (this.request.stream) {
      if (this.request.includeUsage) this.send(usageChunk(this.head, totals));
      res.end('data: [DONE]\n\n');
      return;
    }
    const { api } = this.request;
    if (api === 'messages' || api === 'responses') {
      const answer = (api === 'messages' ? messagesBody : responsesBody)(this.apiHead, this.promptUsage(sequence));
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(answer));
      return;
    }
    const response = completionResponse(this.head, TOKEN_TEXT.repeat(this.generated), 'length', totals);
    const { remoteDecode } = this.options;
    const body = JSON.stringify(
      remoteDecode === undefined ? response : { ...response, kv_transfer_params: remoteDecode(sequence) },
    );
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(body);
  }

  private send(chunk: object): void {
    this.res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }
}
