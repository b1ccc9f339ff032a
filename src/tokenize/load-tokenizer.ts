/**
 * One model's tokenizer, loaded from its directory (tokenizer-files.ts): the encoder
 * (@huggingface/tokenizers, pure JavaScript: docs/tokenize.md has the measurements behind the
 * choice), its chat template (chat-render.ts), and its anchor scanner for session reuse.
 *
 * Encoding as vLLM does:
 * - chat: the rendered template, encoded with `add_special_tokens: false` (the template already
 *   carries the special tokens);
 * - `/v1/completions` with a string prompt: encoded with `add_special_tokens: true`, so the
 *   tokenizer's post-processor adds what it adds (a BOS for Llama-style tokenizers; nothing for
 *   Qwen).
 *
 * Loading takes about a second and ~120 MiB for Qwen3's 150k-token vocabulary: done once per
 * model per worker thread. Everything here is synchronous: call it on a worker
 * (tokenizer-pool.ts), never on the proxy's event loop.
 */
import { Tokenizer } from '@huggingface/tokenizers';

import { AddedTokenScanner, anchorUnsafeReason, type AddedToken } from './added-token-anchors.js';
import { ChatRenderer, type ChatExtras } from './chat-render.js';
import { encodeWithReuse, type EncodedText, type ReuseResult } from './prefix-reuse.js';
import { inputError, loadError } from './tokenizer-errors.js';
import { readTokenizerFiles } from './tokenizer-files.js';

export interface LoadTokenizerOptions {
  /** Require a chat template (default true): a directory without one fails to load. */
  chat?: boolean;
}

export class LoadedTokenizer {
  /** Why session reuse is off for this tokenizer (undefined: it is on). */
  readonly reuseOffReason: string | undefined;

  private constructor(
    readonly dir: string,
    private readonly tokenizer: Tokenizer,
    private readonly renderer: ChatRenderer | undefined,
    private readonly scanner: AddedTokenScanner | undefined,
    reuseOffReason: string | undefined,
  ) {
    this.reuseOffReason = reuseOffReason;
  }

  static load(dir: string, options: LoadTokenizerOptions = {}): LoadedTokenizer {
    const files = readTokenizerFiles(dir);
    const configFile = `${files.dir}/tokenizer_config.json`;
    if ((options.chat ?? true) && files.chatTemplate === undefined)
      throw loadError(
        configFile,
        'has no chat_template (nor chat_template.jinja/.json beside it), needed for chat requests',
      );
    const renderer = files.chatTemplate
      ? new ChatRenderer(files.chatTemplate.source, files.specialTokens, files.chatTemplate.file)
      : undefined;
    let tokenizer: Tokenizer;
    try {
      tokenizer = new Tokenizer(files.tokenizerJson, files.config);
    } catch (error) {
      throw loadError(`${files.dir}/tokenizer.json`, `the tokenizer does not load (${(error as Error).message})`);
    }
    const reuseOff = anchorUnsafeReason(files.tokenizerJson);
    const added = ((files.tokenizerJson.added_tokens ?? []) as { content: unknown; id: unknown }[])
      .filter((t) => typeof t.content === 'string' && typeof t.id === 'number')
      .map((t) => ({ content: t.content, id: t.id }) as AddedToken);
    const scanner = reuseOff === undefined ? new AddedTokenScanner(added) : undefined;
    return new LoadedTokenizer(files.dir, tokenizer, renderer, scanner, reuseOff);
  }

  /** The ids of `text`; `addSpecialTokens` as the tokenizer's post-processor defines it. */
  encode(text: string, addSpecialTokens: boolean): Uint32Array {
    return Uint32Array.from(this.tokenizer.encode(text, { add_special_tokens: addSpecialTokens }).ids);
  }

  /** The text vLLM's chat path would tokenize. Throws ERR_KVROUTE_TOKENIZE_INPUT on bad messages. */
  renderChat(messages: unknown, extras?: ChatExtras): string {
    if (!this.renderer) throw inputError('messages', `the tokenizer in ${this.dir} has no chat template`);
    return this.renderer.render(messages, extras);
  }

  /** A `/v1/completions` string prompt's ids. */
  tokenizeText(text: unknown): Uint32Array {
    if (typeof text !== 'string') throw inputError('prompt', 'must be a string');
    return this.encode(text, true);
  }

  /**
   * A chat request's ids, reusing `previous` (the same session's last encoding) where exact.
   * Without a scanner (reuse unsafe for this tokenizer), always a full encode with no anchors.
   */
  tokenizeChat(messages: unknown, extras: ChatExtras | undefined, previous?: EncodedText): ReuseResult {
    const text = this.renderChat(messages, extras);
    const encode = (t: string) => this.encode(t, false);
    if (!this.scanner) return { encoded: { text, tokens: encode(text), anchors: undefined }, reusedTokens: 0 };
    return encodeWithReuse(previous, text, encode, this.scanner);
  }
}

/** Loads a tokenizer directory (see LoadedTokenizer.load). Throws ERR_KVROUTE_TOKENIZER naming the file. */
export function loadTokenizer(dir: string, options?: LoadTokenizerOptions): LoadedTokenizer {
  return LoadedTokenizer.load(dir, options);
}
