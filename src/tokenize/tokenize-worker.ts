/**
 * The Piscina task of TokenizerPool (tokenizer-pool.ts): loads a tokenizer directory on first
 * use (kept for the worker's life, one per directory) and renders and encodes on this thread.
 *
 * Never throws: every failure comes back as `{ error }` (a WireError), because structured clone
 * would drop an Error's `code`. Session state lives in the pool's thread, not here: `previous`
 * arrives with the task, so any worker can serve any session.
 */
import type { ChatExtras } from './chat-render.js';
import { LoadedTokenizer } from './load-tokenizer.js';
import type { EncodedText } from './prefix-reuse.js';
import { bodyTokens, type BodyEndpoint } from './request-body-tokens.js';
import { toWire, type WireError } from './tokenizer-errors.js';

export type TokenizeTask =
  | { kind: 'load'; dir: string }
  | { kind: 'text'; dir: string; text: unknown }
  | {
      kind: 'chat';
      dir: string;
      messages: unknown;
      extras: ChatExtras | undefined;
      /** The session's last encoding, when it has one. */
      previous: EncodedText | undefined;
      /** Return the text and anchors too (the pool keeps them for the session). */
      keep: boolean;
    }
  | {
      /** A raw completion request body (request-body-tokens.ts); `dir` undefined: no tokenizer. */
      kind: 'body';
      dir: string | undefined;
      endpoint: BodyEndpoint;
      body: Uint8Array;
      previous: EncodedText | undefined;
      keep: boolean;
    };

export type TokenizeReply =
  | { error: WireError }
  | { loaded: true; reuseOffReason: string | undefined }
  | { tokens: Uint32Array; reusedTokens: number; kept?: EncodedText }
  | { none: string };

const loaded = new Map<string, LoadedTokenizer>();

function tokenizerFor(dir: string): LoadedTokenizer {
  let tokenizer = loaded.get(dir);
  if (!tokenizer) {
    tokenizer = LoadedTokenizer.load(dir);
    loaded.set(dir, tokenizer);
  }
  return tokenizer;
}

export default function tokenize(task: TokenizeTask): TokenizeReply {
  try {
    if (task.kind === 'body') {
      const got = bodyTokens(
        task.endpoint,
        task.body,
        task.dir === undefined ? undefined : tokenizerFor(task.dir),
        task.previous,
      );
      if ('none' in got) return got;
      const kept = task.keep && got.reused !== undefined ? { kept: got.reused.encoded } : {};
      return { tokens: got.tokens, reusedTokens: got.reused?.reusedTokens ?? 0, ...kept };
    }
    const tokenizer = tokenizerFor(task.dir);
    switch (task.kind) {
      case 'load':
        return { loaded: true, reuseOffReason: tokenizer.reuseOffReason };
      case 'text':
        return { tokens: tokenizer.tokenizeText(task.text), reusedTokens: 0 };
      case 'chat': {
        const { encoded, reusedTokens } = tokenizer.tokenizeChat(task.messages, task.extras, task.previous);
        return { tokens: encoded.tokens, reusedTokens, ...(task.keep ? { kept: encoded } : {}) };
      }
    }
  } catch (error) {
    return { error: toWire(error) };
  }
}
