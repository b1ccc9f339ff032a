/**
 * The native request scanner (native/scan/request-scan.h): one addon call from a completion request's
 * raw body bytes to its model, stream flag, user, priority, output cap, and block ids (the body's
 * `hash_ids`, else the prompt text hashed as the router hashes it), with JSON validated by
 * simdjson. The proxy-side contract (errors, fallbacks, what is forwarded) is in
 * src/proxy/exchange/request-scan.ts.
 *
 * scanBody() runs on the caller's thread with one scanner per thread, whose results land in
 * preallocated arrays; scanBodyAsync() parses and hashes on the libuv threadpool, so a large body
 * costs the event loop only the promise. The bytes must stay unchanged until it settles.
 */
import { loadNative, type NativeRequestScanner, type NativeScanResult } from './native.js';
import { checkInteger } from './validate.js';
import { invalidType } from './errors.js';

export type ScanEndpoint = 'chat' | 'completions';
export type ScanErrorCode = 'invalid_json' | 'missing_field' | 'invalid_field';
/**
 * Why the scanner handed a body back to the JavaScript path: a number JSON.parse takes but a
 * double cannot hold exactly as simdjson needs (1e400, an integer beyond 64 bits), a `\u` escape
 * of an unpaired surrogate, or a body simdjson will not allocate for.
 */
export type ScanFallbackReason = 'number_range' | 'lone_surrogate' | 'resources';

/** Ids hashed from the prompt text, with the token counts the router derives for a prompt. */
export interface PromptIds {
  kind: 'prompt';
  hashIds: BigUint64Array;
  /** ceil(UTF-8 bytes of the prompt text / 4). */
  inputTokens: number;
  /** chunkBytes / 4. */
  blockTokens: number;
}

/** The body's own `hash_ids`. */
export interface BodyIds {
  kind: 'body';
  hashIds: Float64Array;
}

export type ScanResult =
  | {
      kind: 'ok';
      model: string;
      /** The body's `user` when it is a non-empty string. */
      user: string | undefined;
      stream: boolean;
      /** The body's integer `priority` (-0 as 0); undefined when absent or null (anything else is an error). */
      priority: number | undefined;
      /**
       * The output cap: for chat `max_completion_tokens` unless absent or null, else `max_tokens`;
       * for completions `max_tokens`; when a non-negative integer (-0 as 0); undefined otherwise.
       */
      maxTokens: number | undefined;
      ids: PromptIds | BodyIds;
      /** The body without `hash_ids` (strip requested and present), else undefined: the bytes as given. */
      forward: Uint8Array | undefined;
    }
  | { kind: 'error'; code: ScanErrorCode; param: string | null; message: string }
  | { kind: 'fallback'; reason: ScanFallbackReason };

const CODES: readonly ScanErrorCode[] = ['invalid_json', 'missing_field', 'invalid_field'];
const PARAMS: readonly (string | null)[] = [null, 'model', 'messages', 'prompt', 'hash_ids', 'priority'];
const FALLBACKS: readonly ScanFallbackReason[] = ['number_range', 'number_range', 'lone_surrogate', 'resources'];
const OK = 0;
const ERROR = 1;
const IDS_PROMPT = 1;

/** The thread's scanner and the arrays it writes (native/bindings/js-request-scan.h). */
let scanner: { native: NativeRequestScanner; out: Float64Array; values: unknown[] } | undefined;

function threadScanner(): NonNullable<typeof scanner> {
  if (scanner === undefined) {
    const out = new Float64Array(10);
    const values: unknown[] = [undefined, undefined, undefined, undefined];
    scanner = { native: new (loadNative().RequestScanner)(out, values), out, values };
  }
  return scanner;
}

function checkArgs(bytes: Uint8Array, chunkBytes: number): void {
  if (!(bytes instanceof Uint8Array)) throw invalidType('bytes', 'a Uint8Array', bytes);
  checkInteger('chunkBytes', chunkBytes, 1, 1 << 24);
}

function failure(outcome: number, code: number, param: number, fallback: number, message: unknown): ScanResult {
  if (outcome === ERROR)
    return { kind: 'error', code: CODES[code]!, param: PARAMS[param] ?? null, message: message as string };
  return { kind: 'fallback', reason: FALLBACKS[fallback]! };
}

/** The scanner writes NaN for an absent number (a present one is always an integer). */
function absentIfNaN(x: number): number | undefined {
  return Number.isNaN(x) ? undefined : x;
}

/**
 * Scans `bytes` on this thread. `chunkBytes` is the router's hashChunkBytes; `strip` asks for the
 * body without `hash_ids` (--strip-extensions).
 */
export function scanBody(endpoint: ScanEndpoint, bytes: Uint8Array, chunkBytes: number, strip: boolean): ScanResult {
  checkArgs(bytes, chunkBytes);
  const { native, out, values } = threadScanner();
  const ids = native.scan(bytes, endpoint === 'chat' ? 0 : 1, chunkBytes, strip);
  if (out[0] !== OK) return failure(out[0]!, out[1]!, out[2]!, out[3]!, values[2]);
  return {
    kind: 'ok',
    model: values[0] as string,
    user: values[1] as string | undefined,
    stream: out[4] === 1,
    priority: absentIfNaN(out[8]!),
    maxTokens: absentIfNaN(out[9]!),
    ids:
      out[5] === IDS_PROMPT
        ? { kind: 'prompt', hashIds: ids as BigUint64Array, inputTokens: out[6]!, blockTokens: out[7]! }
        : { kind: 'body', hashIds: ids as Float64Array },
    forward: values[3] as Uint8Array | undefined,
  };
}

/** scanBody() on the libuv threadpool, of a copy of `bytes` taken at the call: the caller may reuse, transfer or drop them at once. */
export async function scanBodyAsync(
  endpoint: ScanEndpoint,
  bytes: Uint8Array,
  chunkBytes: number,
  strip: boolean,
): Promise<ScanResult> {
  checkArgs(bytes, chunkBytes);
  const r: NativeScanResult = await threadScanner().native.scanAsync(
    bytes,
    endpoint === 'chat' ? 0 : 1,
    chunkBytes,
    strip,
  );
  if (r.outcome !== OK) return failure(r.outcome, r.code, r.param, r.fallback, r.message);
  return {
    kind: 'ok',
    model: r.model!,
    user: r.user,
    stream: r.stream!,
    priority: r.priority,
    maxTokens: r.maxTokens,
    ids:
      r.idsKind === IDS_PROMPT
        ? { kind: 'prompt', hashIds: r.ids as BigUint64Array, inputTokens: r.inputTokens!, blockTokens: r.blockTokens! }
        : { kind: 'body', hashIds: r.ids as Float64Array },
    forward: r.forward,
  };
}

/** simdjson's kernel for this CPU (e.g. "icelake", "haswell", "fallback"). */
export function scanKernel(): string {
  return loadNative().scanKernel;
}
