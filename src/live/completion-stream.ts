/**
 * One streamed `/v1/completions` request against a live endpoint, timed: when it was sent, when
 * the first token arrived, when it finished, and the engine's own token counts (`usage`, asked
 * for with `stream_options.include_usage`). Upstream HTTP is undici. SSE is read line by line:
 * a `data:` line is one JSON chunk, `data: [DONE]` ends the stream.
 */
import { Agent, request } from 'undici';

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

interface Chunk {
  choices?: Array<{ text?: string }>;
  usage?: { prompt_tokens?: number; completion_tokens?: number };
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
  let firstToken: number | undefined;
  let usage: Chunk['usage'];
  let chunks = 0;
  let carry = '';
  response.body.setEncoding('utf8');
  for await (const piece of response.body as AsyncIterable<string>) {
    const lines = (carry + piece).split('\n');
    carry = lines.pop()!;
    for (const line of lines) {
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '[DONE]') continue;
      const chunk = JSON.parse(data) as Chunk;
      if (chunk.usage) usage = chunk.usage;
      if ((chunk.choices?.length ?? 0) > 0) {
        chunks++;
        firstToken ??= r.now();
      }
    }
  }
  const finish = r.now();
  if (firstToken === undefined) throw new Error(`${r.url}/v1/completions streamed no tokens`);
  return {
    sent,
    firstToken,
    finish,
    promptTokens: usage?.prompt_tokens ?? 0,
    outputTokens: usage?.completion_tokens ?? chunks,
  };
}
