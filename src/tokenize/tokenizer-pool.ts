/**
 * Request tokenization off the event loop: Piscina worker threads, each holding one tokenizer per
 * model (loaded on first use), rendering chat templates and encoding there. Rendering a long
 * conversation takes tens of milliseconds and encoding 100k tokens hundreds: neither may run on
 * the proxy's event loop.
 *
 * Bounds:
 * - queue: at most `threads + maxQueue` tasks admitted; past that a call rejects at once with
 *   ERR_KVROUTE_TOKENIZER_BUSY (the caller falls back to text-chunk keys rather than wait);
 * - input: a request's text (message contents, or the prompt) over `maxInputChars` is refused
 *   (ERR_KVROUTE_TOKENIZE_INPUT) before it is sent to a worker;
 * - memory: each worker's heap is capped (`maxWorkerHeapMb`, Node's resourceLimits); the session
 *   cache is bounded by entries and bytes (session-cache.ts).
 * A worker that dies (out of memory, a native fault) rejects its task with
 * ERR_KVROUTE_TOKENIZER_WORKER; Piscina starts a new one and the process is unaffected.
 *
 * Sessions: with a `sessionKey`, the pool keeps that session's last text and tokens (per model)
 * and sends them with the next turn, which re-encodes only from the last anchor before the
 * point where the texts diverge (prefix-reuse.ts). Concurrent turns of one session are each
 * exact; the last to finish is kept.
 *
 * Hazard: the session's text and tokens are copied to the worker and back (structured clone,
 * ~2 bytes per character and 4 per token): cheap next to encoding, but not free for 100k+ token
 * sessions; the bench reports the whole round trip.
 */
import { availableParallelism } from 'node:os';

import type { Piscina } from 'piscina';

import type { ChatExtras } from './chat-render.js';
import type { BodyEndpoint } from './request-body-tokens.js';
import { SessionCache } from './session-cache.js';
import { destroyWorkerPool, newWorkerPool } from '../core/worker-pool.js';
import { resolveTokenizerDir } from './tokenizer-files.js';
import { fromWire, inputError, loadError, TokenizerError } from './tokenizer-errors.js';
import type { TokenizeReply, TokenizeTask } from './tokenize-worker.js';

export interface TokenizerPoolOptions {
  /**
   * Model name → tokenizer directory (tokenizer.json, tokenizer_config.json), or the name of a
   * bundled one (`qwen3`). The model `*` stands for every model without its own entry in
   * tokenizeBody().
   */
  tokenizers: Record<string, string>;
  /** Worker threads (default: 1, or half the cores when there are 4 or more). */
  threads?: number;
  /** Tasks that may wait beyond one per thread (default 256). */
  maxQueue?: number;
  /** Characters of text per request (default 4,000,000: ~1M tokens). */
  maxInputChars?: number;
  /** Sessions kept for reuse (default 4,096). */
  maxSessions?: number;
  /** Bytes of session text and tokens kept (default 256 MiB). */
  maxSessionBytes?: number;
  /** Old-generation heap per worker, in MiB (default 2,048). */
  maxWorkerHeapMb?: number;
}

export interface TokenizerPoolStats {
  threads: number;
  queued: number;
  inFlight: number;
  completed: number;
  rejectedBusy: number;
  workerFailures: number;
  sessions: { entries: number; bytes: number; hits: number; misses: number; evictions: number };
  /** Tokens taken from a session's previous turn instead of encoded, and tokens encoded. */
  reusedTokens: number;
  encodedTokens: number;
}

/**
 * The compiled worker beside this module. Run from the TypeScript sources (tests), this module
 * is a .ts file and worker threads cannot load its .ts sibling, so it uses the build in dist/.
 */
const WORKER_URL = import.meta.url.endsWith('.ts')
  ? new URL('../../dist/tokenize/tokenize-worker.js', import.meta.url).href
  : new URL('./tokenize-worker.js', import.meta.url).href;

function positiveInt(name: string, value: number | undefined, fallback: number, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min)
    throw inputError(`options.${name}`, `must be an integer ≥ ${min}, got ${String(value)}`);
  return value;
}

/**
 * Characters of text a chat request carries (every string in it, at any depth), counted
 * iteratively and stopping once past `limit`, so a huge or deeply nested body costs O(limit).
 */
function inputChars(value: unknown, limit: number): number {
  let n = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && n <= limit) {
    const item = stack.pop();
    if (typeof item === 'string') n += item.length;
    else if (item !== null && typeof item === 'object') {
      for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push(child);
    }
  }
  return n;
}

/** Only the fields the template reads: the caller may pass the whole request body. */
function pickExtras(extras: ChatExtras | undefined): ChatExtras | undefined {
  if (extras === undefined || extras === null) return undefined;
  const { tools, documents, chat_template_kwargs, add_generation_prompt, continue_final_message } = extras;
  return { tools, documents, chat_template_kwargs, add_generation_prompt, continue_final_message };
}

export class TokenizerPool {
  private readonly pool: Piscina;
  private readonly sessions: SessionCache;
  private readonly dirs: Map<string, string>;
  private readonly capacity: number;
  private readonly threads: number;
  private readonly maxInputChars: number;
  private pending = 0;
  private closed = false;
  private readonly counts = { completed: 0, rejectedBusy: 0, workerFailures: 0, reusedTokens: 0, encodedTokens: 0 };

  private constructor(options: TokenizerPoolOptions) {
    const tokenizers = options.tokenizers;
    if (tokenizers === null || typeof tokenizers !== 'object')
      throw inputError('options.tokenizers', 'must map model names to directories');
    this.dirs = new Map();
    for (const [model, dir] of Object.entries(tokenizers)) {
      if (typeof dir !== 'string' || dir.length === 0)
        throw loadError(String(dir), `tokenizers["${model}"] must be a directory path`);
      this.dirs.set(model, resolveTokenizerDir(dir));
    }
    const threads = positiveInt(
      'threads',
      options.threads,
      availableParallelism() >= 4 ? Math.floor(availableParallelism() / 2) : 1,
    );
    const maxQueue = positiveInt('maxQueue', options.maxQueue, 256, 0);
    this.threads = threads;
    this.capacity = threads + maxQueue;
    this.maxInputChars = positiveInt('maxInputChars', options.maxInputChars, 4_000_000);
    this.sessions = new SessionCache(
      positiveInt('maxSessions', options.maxSessions, 4096, 0),
      positiveInt('maxSessionBytes', options.maxSessionBytes, 256 * 2 ** 20, 0),
    );
    this.pool = newWorkerPool({
      filename: WORKER_URL,
      minThreads: threads,
      maxThreads: threads,
      maxQueue: maxQueue + threads,
      idleTimeout: Infinity,
      resourceLimits: { maxOldGenerationSizeMb: positiveInt('maxWorkerHeapMb', options.maxWorkerHeapMb, 2048, 8) },
    });
  }

  /**
   * A pool with every configured tokenizer loaded to check it: a directory that fails rejects
   * with ERR_KVROUTE_TOKENIZER naming the file, and the pool is closed. One load task per thread
   * and directory, run together, so that each worker is likely warm (Piscina does not promise
   * that each lands on a different worker; a cold one loads on its first task, ~1 s).
   */
  static async open(options: TokenizerPoolOptions): Promise<TokenizerPool> {
    const pool = new TokenizerPool(options);
    try {
      for (const dir of new Set(pool.dirs.values()))
        await Promise.all(Array.from({ length: pool.threads }, () => pool.run({ kind: 'load', dir })));
    } catch (error) {
      await pool.close();
      throw error;
    }
    return pool;
  }

  /** The models this pool tokenizes for. */
  models(): string[] {
    return [...this.dirs.keys()];
  }

  has(model: string): boolean {
    return this.dirs.has(model);
  }

  /**
   * A chat request's token ids, rendered and encoded as vLLM does. `extras` carries the request's
   * `tools`, `chat_template_kwargs`, `add_generation_prompt`, `continue_final_message`,
   * `documents`. With `sessionKey`, reuses that session's previous turn where exact.
   */
  async tokenizeChat(model: string, messages: unknown, extras?: ChatExtras, sessionKey?: string): Promise<Uint32Array> {
    const dir = this.dirFor(model);
    const chars = inputChars([messages, extras?.tools, extras?.documents], this.maxInputChars);
    if (chars > this.maxInputChars)
      throw inputError('messages', `more than ${this.maxInputChars} characters of text (the tokenizer's limit)`);
    const key = sessionKey === undefined ? undefined : `${model}\u0000${sessionKey}`;
    const previous = key === undefined ? undefined : this.sessions.get(key);
    const reply = await this.run({
      kind: 'chat',
      dir,
      messages,
      extras: pickExtras(extras),
      previous,
      keep: key !== undefined,
    });
    if (!('tokens' in reply)) throw new TokenizerError('ERR_KVROUTE_TOKENIZER_WORKER', 'worker sent no tokens');
    if (key !== undefined && reply.kept) this.sessions.set(key, reply.kept);
    this.counts.reusedTokens += reply.reusedTokens;
    this.counts.encodedTokens += reply.tokens.length - reply.reusedTokens;
    return reply.tokens;
  }

  /** A `/v1/completions` string prompt's ids (special tokens added as the tokenizer adds them). */
  async tokenizeText(model: string, text: string): Promise<Uint32Array> {
    const dir = this.dirFor(model);
    if (typeof text !== 'string') throw inputError('prompt', 'must be a string');
    if (text.length > this.maxInputChars)
      throw inputError('prompt', `${text.length} characters exceed the tokenizer's limit of ${this.maxInputChars}`);
    const reply = await this.run({ kind: 'text', dir, text });
    if (!('tokens' in reply)) throw new TokenizerError('ERR_KVROUTE_TOKENIZER_WORKER', 'worker sent no tokens');
    this.counts.encodedTokens += reply.tokens.length;
    return reply.tokens;
  }

  /**
   * A raw completion request body's token ids (request-body-tokens.ts), parsed, rendered and
   * encoded on a worker: `{ tokens }`, or `{ none: reason }` when the body has no token ids and
   * the model no tokenizer (the caller routes on text-chunk keys). A model without its own entry
   * takes the `*` tokenizer if there is one. With `sessionKey`, a chat body reuses that
   * session's previous turn where exact.
   */
  async tokenizeBody(
    model: string,
    endpoint: BodyEndpoint,
    body: Uint8Array,
    sessionKey?: string,
  ): Promise<{ tokens: Uint32Array } | { none: string }> {
    const dir = this.dirs.get(model) ?? this.dirs.get('*');
    if (body.byteLength > 4 * this.maxInputChars)
      throw inputError('body', `${body.byteLength} bytes exceed the tokenizer's limit of ${4 * this.maxInputChars}`);
    const key =
      sessionKey === undefined || dir === undefined || endpoint !== 'chat' ? undefined : `${model}\u0000${sessionKey}`;
    const previous = key === undefined ? undefined : this.sessions.get(key);
    const reply = await this.run({ kind: 'body', dir, endpoint, body, previous, keep: key !== undefined });
    if ('none' in reply) return reply;
    if (!('tokens' in reply)) throw new TokenizerError('ERR_KVROUTE_TOKENIZER_WORKER', 'worker sent no tokens');
    if (key !== undefined && reply.kept) this.sessions.set(key, reply.kept);
    this.counts.reusedTokens += reply.reusedTokens;
    this.counts.encodedTokens += reply.tokens.length - reply.reusedTokens;
    return { tokens: reply.tokens };
  }

  /** Whether `model` has a tokenizer here, its own or the `*` one. */
  covers(model: string): boolean {
    return this.dirs.has(model) || this.dirs.has('*');
  }

  /** Forgets a session's kept turn (e.g. when the session ends). */
  forgetSession(model: string, sessionKey: string): void {
    this.sessions.delete(`${model}\u0000${sessionKey}`);
  }

  stats(): TokenizerPoolStats {
    const s = this.sessions;
    return {
      threads: this.pool.threads.length,
      queued: this.pool.queueSize,
      inFlight: this.pending,
      ...this.counts,
      sessions: { entries: s.size, bytes: s.bytes, hits: s.hits, misses: s.misses, evictions: s.evictions },
    };
  }

  /** Stops the workers; pending and later calls reject with ERR_KVROUTE_TOKENIZER_WORKER. Safe more than once. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.sessions.clear();
    await destroyWorkerPool(this.pool);
  }

  private dirFor(model: string): string {
    const dir = this.dirs.get(model);
    if (dir === undefined) throw inputError('model', `no tokenizer is configured for model ${JSON.stringify(model)}`);
    return dir;
  }

  private async run(task: TokenizeTask): Promise<TokenizeReply> {
    if (this.closed) throw new TokenizerError('ERR_KVROUTE_TOKENIZER_WORKER', 'the tokenizer pool is closed');
    if (this.pending >= this.capacity) {
      this.counts.rejectedBusy += 1;
      throw new TokenizerError('ERR_KVROUTE_TOKENIZER_BUSY', `the tokenizer queue is full (${this.capacity} tasks)`);
    }
    this.pending += 1;
    let reply: TokenizeReply;
    try {
      reply = (await this.pool.run(task)) as TokenizeReply;
    } catch (error) {
      this.counts.workerFailures += 1;
      const reason = error instanceof Error ? error.message : String(error);
      throw new TokenizerError('ERR_KVROUTE_TOKENIZER_WORKER', `tokenizer worker failed: ${reason}`);
    } finally {
      this.pending -= 1;
    }
    if ('error' in reply) throw fromWire(reply.error);
    this.counts.completed += 1;
    return reply;
  }
}
