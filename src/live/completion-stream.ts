/**
 * One streamed `/v1/completions` request against a live endpoint, timed: when it was sent, when
 * the first token arrived, when it finished, and the engine's own token counts (`usage`, asked
 * for with `stream_options.include_usage`). Upstream HTTP is undici; the stream is read by the
 * replayer's SseReader (src/replay/sse.ts).
 */
import { Agent, request } from 'undici';

import { SseReader } from '../replay/sse.js';

export interface CompletionTiming {
  sent: number;
  firstToken: number;
  finish: number;
  promptTokens: number;
  outputTokens: number;
}

export interface CompletionRequest {
  url: string;
  model: string;
  prompt: string;
  maxTokens: number;
  /** vLLM's `ignore_eos`, so the engine generates exactly `maxTokens`. */
  ignoreEos: boolean;
  dispatcher: Agent;
  /** The clock the times are on (seconds). */
  now: () => number;
  signal?: AbortSignal;
}

export async function streamCompletion(r: CompletionRequest): Promise<CompletionTiming> {
  const body: Record<string, unknown> = {
    model: r.model,
    prompt: r.prompt,
    max_tokens: r.maxTokens,
    stream: true,
    stream_options: { include_usage: true },
  };
  if (r.ignoreEos) body.ignore_eos = true;
  const sent = r.now();
  const response = await request(`${r.url}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    dispatcher: r.dispatcher,
    signal: r.signal,
  });
  if (response.statusCode !== 200) {
    const text = (await response.body.text()).slice(0, 300);
    throw new Error(`${r.url}/v1/completions answered ${response.statusCode}: ${text}`);
  }
  const sse = new SseReader(r.now);
  for await (const chunk of response.body as AsyncIterable<Buffer>) sse.push(chunk);
  sse.end();
  const finish = r.now();
  if (sse.error !== undefined) throw new Error(`${r.url}/v1/completions streamed an error: ${sse.error}`);
  if (sse.firstTokenAt === undefined) throw new Error(`${r.url}/v1/completions streamed no tokens`);
  return {
    sent,
    firstToken: sse.firstTokenAt,
    finish,
    promptTokens: sse.usage?.prompt_tokens ?? 0,
    outputTokens: sse.usage?.completion_tokens ?? sse.tokenChunks,
  };
}
