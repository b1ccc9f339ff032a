/**
 * One completion request on the wire: submits it to the real-time engine and writes its tokens
 * as they are delivered, as an SSE stream or, at the end, one JSON response.
 *
 * Disconnect: the response's `close` event (the client went away, streaming or not) cancels the
 * request inside the engine, which frees its blocks and drops it from the running and waiting
 * counts at once; no token is written after it.
 *
 * Backpressure: chunks are tiny and a step yields one token per request, so a slow reader only
 * buffers; the engine is not paused for it (vLLM does not pause generation for a slow client).
 */
import type { ServerResponse } from 'node:http';

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
import type { Generation, GenerationListener, RealtimeEngine } from './realtime-engine.js';

export interface ExchangeContext {
  realtime: RealtimeEngine;
  metrics: EngineMetrics;
}

export class CompletionExchange implements GenerationListener {
  private generation: Generation | undefined;
  private generated = 0;
  private lastTokenAt = 0;

  constructor(
    private readonly res: ServerResponse,
    private readonly request: CompletionRequest,
    private readonly head: ResponseHead,
    private readonly requestId: number,
    private readonly context: ExchangeContext,
  ) {}

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
      if (this.generated === 0) metrics.firstToken(at - sequence.submittedAt);
      else metrics.interToken(i === 0 ? at - this.lastTokenAt : 0);
      this.generated++;
      if (!this.request.stream || this.res.destroyed) continue;
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
    this.context.metrics.finished(at - sequence.submittedAt);
    const totals = usage(this.request.inputTokens, this.generated, sequence.cachedTokens ?? 0);
    const { res } = this;
    if (res.destroyed) return;
    if (this.request.stream) {
      if (this.request.includeUsage) this.send(usageChunk(this.head, totals));
      res.end('data: [DONE]\n\n');
      return;
    }
    const body = JSON.stringify(completionResponse(this.head, TOKEN_TEXT.repeat(this.generated), 'length', totals));
    res.writeHead(200, { 'Content-Type': 'application/json' });
    res.end(body);
  }

  private send(chunk: object): void {
    this.res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }
}
