/**
 * A chat template rendered as vLLM's chat completions path renders it before tokenizing
 * (`apply_hf_chat_template` → transformers' `apply_chat_template(tokenize=False)`), with
 * @huggingface/jinja (which sets transformers' `trim_blocks` and `lstrip_blocks`, and provides
 * `raise_exception`, `strftime_now` and a Python-style `tojson`).
 *
 * The template's variables, later ones winning as in vLLM:
 * 1. the special-token strings of tokenizer_config.json (`bos_token`, `eos_token`, …,
 *    `additional_special_tokens`): transformers' `special_tokens_map`;
 * 2. `add_generation_prompt` (vLLM's default: true), `continue_final_message` (default false),
 *    `tools` when the request has them, `documents` when given;
 * 3. the request's `chat_template_kwargs` (e.g. `enable_thinking: false`);
 * 4. `messages`.
 * With `continue_final_message`, the text is cut after the final message's content, as
 * transformers does. Both it and `add_generation_prompt` true is refused, as vLLM refuses it.
 *
 * The content format ("string" or "openai") is detected as vLLM's "auto" does in spirit: a
 * template that loops over a message's `content` takes a list of parts; any other a string.
 */
import { Template } from '@huggingface/jinja';

import { conversationOf, toolsOf, type ContentFormat } from './chat-messages.js';
import { inputError, loadError } from './tokenizer-errors.js';
import type { SpecialTokens } from './tokenizer-files.js';

/** What a chat request adds to its messages (the OpenAI body's fields of the same names). */
export interface ChatExtras {
  tools?: unknown;
  documents?: unknown;
  chat_template_kwargs?: Record<string, unknown>;
  add_generation_prompt?: boolean;
  continue_final_message?: boolean;
}

const LOOPS_OVER_CONTENT = /\{%-?\s*for\s+\w+\s+in\s+[\w.]*(?:\.content|\[\s*['"]content['"]\s*\])/;

export function detectContentFormat(source: string): ContentFormat {
  return LOOPS_OVER_CONTENT.test(source) ? 'openai' : 'string';
}

export class ChatRenderer {
  readonly contentFormat: ContentFormat;
  private readonly template: Template;

  /** Parses the template; a template that does not parse is ERR_KVROUTE_TOKENIZER naming `file`. */
  constructor(
    source: string,
    private readonly specialTokens: SpecialTokens,
    file: string,
  ) {
    try {
      this.template = new Template(source);
    } catch (error) {
      throw loadError(file, `chat template does not parse (${(error as Error).message})`);
    }
    this.contentFormat = detectContentFormat(source);
  }

  /** The prompt text vLLM would tokenize for this chat request. Throws ERR_KVROUTE_TOKENIZE_INPUT. */
  render(messages: unknown, extras: ChatExtras = {}): string {
    const conversation = conversationOf(messages, this.contentFormat);
    const kwargs = extras.chat_template_kwargs;
    if (kwargs !== undefined && (kwargs === null || typeof kwargs !== 'object' || Array.isArray(kwargs)))
      throw inputError('chat_template_kwargs', 'must be an object');
    const context: Record<string, unknown> = {
      ...this.specialTokens,
      add_generation_prompt: extras.add_generation_prompt ?? true,
      continue_final_message: extras.continue_final_message ?? false,
    };
    const tools = toolsOf(extras.tools);
    if (tools !== undefined) context.tools = tools;
    if (extras.documents !== undefined && extras.documents !== null) context.documents = extras.documents;
    Object.assign(context, kwargs ?? {});
    context.messages = conversation;
    if (context.add_generation_prompt === true && context.continue_final_message === true)
      throw inputError('continue_final_message', 'cannot be true with add_generation_prompt true');
    let text: string;
    try {
      text = this.template.render(context);
    } catch (error) {
      throw inputError('messages', `the chat template failed to render them (${(error as Error).message})`);
    }
    return context.continue_final_message === true ? cutAfterFinal(text, conversation.at(-1)?.content) : text;
  }
}

/** transformers' continue_final_message: keep the text up to the end of the final message's content. */
function cutAfterFinal(text: string, content: unknown): string {
  const last = Array.isArray(content) ? (content.at(-1) as { text?: unknown } | undefined)?.text : content;
  if (typeof last !== 'string') return text;
  let at = text.lastIndexOf(last);
  if (at >= 0) return text.slice(0, at + last.length);
  const trimmed = last.trim();
  at = text.lastIndexOf(trimmed);
  if (at < 0) throw inputError('messages', 'continue_final_message: the final message is not in the rendered text');
  return text.slice(0, at + trimmed.length);
}
