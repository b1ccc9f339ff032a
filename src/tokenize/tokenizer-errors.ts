/**
 * The errors of request tokenization, each with a stable `code`:
 * - `ERR_KVROUTE_TOKENIZER`: a tokenizer directory failed to load; `file` names the file and the
 *   message the reason (missing, not JSON, no chat template, a template that does not parse);
 * - `ERR_KVROUTE_TOKENIZE_INPUT`: a request's messages, tools or text are malformed; the message
 *   names the field (`messages[2].content[0].text`);
 * - `ERR_KVROUTE_TOKENIZER_BUSY`: the pool's queue is full (the caller falls back, never waits);
 * - `ERR_KVROUTE_TOKENIZER_WORKER`: a worker died mid-task, or the pool is closed.
 *
 * Errors cross the worker boundary as plain `{ code, message, file }` (structured clone drops an
 * Error's own properties) and are rebuilt here by `fromWire`.
 */
import type { KvrouteError } from '../core/errors.js';

export type TokenizerErrorCode =
  | 'ERR_KVROUTE_TOKENIZER'
  | 'ERR_KVROUTE_TOKENIZE_INPUT'
  | 'ERR_KVROUTE_TOKENIZER_BUSY'
  | 'ERR_KVROUTE_TOKENIZER_WORKER';

export class TokenizerError extends Error implements KvrouteError {
  constructor(
    readonly code: TokenizerErrorCode,
    message: string,
    /** The file that failed to load (ERR_KVROUTE_TOKENIZER only). */
    readonly file?: string,
  ) {
    super(message);
    this.name = 'TokenizerError';
  }
}

/** A tokenizer file that failed to load: the message starts with its path. */
export function loadError(file: string, reason: string): TokenizerError {
  return new TokenizerError('ERR_KVROUTE_TOKENIZER', `${file}: ${reason}`, file);
}

/** A malformed request field: `field` as the request spells it. */
export function inputError(field: string, reason: string): TokenizerError {
  return new TokenizerError('ERR_KVROUTE_TOKENIZE_INPUT', `${field}: ${reason}`);
}

/** What a worker sends back instead of throwing. */
export interface WireError {
  code: TokenizerErrorCode;
  message: string;
  file?: string;
}

export function toWire(error: unknown): WireError {
  if (error instanceof TokenizerError)
    return { code: error.code, message: error.message, ...(error.file === undefined ? {} : { file: error.file }) };
  // Anything else thrown inside a worker is a bug or a library failure on this input: reported
  // as bad input with the library's reason, never as a crash.
  const message = error instanceof Error ? error.message : String(error);
  return { code: 'ERR_KVROUTE_TOKENIZE_INPUT', message: `tokenizing failed: ${message}` };
}

export function fromWire(wire: WireError): TokenizerError {
  return new TokenizerError(wire.code, wire.message, wire.file);
}
