/**
 * The JSON objects the simulated engine answers with, shaped as vLLM's OpenAI-compatible server
 * writes them (as vLLM's OpenAI-compatible server does): chat and text
 * completions, their streamed chunks, the usage chunk, `/v1/models`, and error bodies.
 */
import type { Endpoint } from './completion-request.js';
import type { EngineFlavor } from './engine-flavor.js';

/** The text of every generated token: the simulated engine produces no real text. */
export const TOKEN_TEXT = ' tok';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function usage(promptTokens: number, completionTokens: number, cachedTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

/** What every object of one response shares. */
export interface ResponseHead {
  endpoint: Endpoint;
  id: string;
  created: number;
  model: string;
}

/**
 * One streamed chunk carrying `text`. A chat stream's first chunk also carries the assistant
 * role; the chunk of the last token carries its finish reason. With `include_usage`, chunks
 * carry `usage: null` and the usage comes in its own chunk (`usageChunk`).
 */
export function streamChunk(
  head: ResponseHead,
  text: string,
  options: { first: boolean; finishReason: string | null; includeUsage: boolean },
): object {
  const choice =
    head.endpoint === 'chat'
      ? {
          index: 0,
          delta: options.first ? { role: 'assistant', content: text } : { content: text },
          logprobs: null,
          finish_reason: options.finishReason,
        }
      : { index: 0, text, logprobs: null, finish_reason: options.finishReason, stop_reason: null };
  return {
    ...objectHead(head, true),
    choices: [choice],
    ...(options.includeUsage ? { usage: null } : {}),
  };
}

/** The `include_usage` chunk: no choices, the full usage. */
export function usageChunk(head: ResponseHead, totals: Usage): object {
  return { ...objectHead(head, true), choices: [], usage: totals };
}

/** A non-streaming response. */
export function completionResponse(head: ResponseHead, text: string, finishReason: string, totals: Usage): object {
  const choice =
    head.endpoint === 'chat'
      ? {
          index: 0,
          message: { role: 'assistant', content: text, tool_calls: [] },
          logprobs: null,
          finish_reason: finishReason,
          stop_reason: null,
        }
      : { index: 0, text, logprobs: null, finish_reason: finishReason, stop_reason: null };
  return { ...objectHead(head, false), choices: [choice], usage: totals };
}

function objectHead(head: ResponseHead, chunk: boolean): object {
  const object = head.endpoint === 'chat' ? (chunk ? 'chat.completion.chunk' : 'chat.completion') : 'text_completion';
  return { id: head.id, object, created: head.created, model: head.model };
}

export function modelList(model: string, created: number, maxModelLen: number, flavor: EngineFlavor = 'vllm'): object {
  return {
    object: 'list',
    data: [
      {
        id: model,
        object: 'model',
        created,
        owned_by: flavor === 'sglang' ? 'sglang' : 'kvroute-sim',
        root: model,
        parent: null,
        max_model_len: maxModelLen,
      },
    ],
  };
}
