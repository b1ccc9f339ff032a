/**
 * Outcomes of the two request paths (the JavaScript parseRequest + hashing, and the native scanner
 * behind scanRequest) and the first difference between them, shared by the scanner's differential
 * tests (request-scan.test.ts over generated bodies, scan-corpus-differential.test.ts over the fuzz
 * corpus).
 */
import { ClientError } from '../../src/proxy/server/error-body.js';
import type { ParsedRequest } from '../../src/proxy/exchange/request-inputs.js';

export type Outcome =
  | { ok: true; parsed: ParsedRequest }
  | { ok: false; status: number; code: string | null; param: string | null; message: string };

export function caught(error: unknown): Outcome {
  if (error instanceof ClientError)
    return { ok: false, status: error.status, code: error.code, param: error.param, message: error.message };
  // Anything else would be a 500 in the proxy.
  return { ok: false, status: 500, code: null, param: null, message: String(error) };
}

export function settle(run: () => ParsedRequest): Outcome {
  try {
    return { ok: true, parsed: run() };
  } catch (error) {
    return caught(error);
  }
}

export async function settleAsync(run: () => Promise<ParsedRequest>): Promise<Outcome> {
  try {
    return { ok: true, parsed: await run() };
  } catch (error) {
    return caught(error);
  }
}

export const SYNTAX = 'the request body is not valid JSON: ';

/** Bit-exact typed-array equality, kind included. */
export function sameIds(a: unknown, b: unknown): boolean {
  if (a === undefined || b === undefined) return a === b;
  if (!(ArrayBuffer.isView(a) && ArrayBuffer.isView(b))) return false;
  if (a.constructor !== b.constructor || a.byteLength !== b.byteLength) return false;
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** Returns a description of the first difference, or '' when the two outcomes agree. */
export function difference(expected: Outcome, actual: Outcome, bytes: Buffer, strip: boolean): string {
  if (!expected.ok || !actual.ok) {
    if (expected.ok !== actual.ok)
      return `ok ${expected.ok} vs ${actual.ok}: ${JSON.stringify(expected.ok ? 'ok' : expected.message)} vs ${JSON.stringify(actual.ok ? 'ok' : actual.message)}`;
    const e = expected as Extract<Outcome, { ok: false }>;
    const a = actual as Extract<Outcome, { ok: false }>;
    if (e.status !== a.status || e.code !== a.code || e.param !== a.param)
      return `error ${e.status}/${e.code}/${e.param} vs ${a.status}/${a.code}/${a.param} (${e.message} | ${a.message})`;
    const bothSyntax = e.message.startsWith(SYNTAX) && a.message.startsWith(SYNTAX);
    if (!bothSyntax && e.message !== a.message)
      return `message ${JSON.stringify(e.message)} vs ${JSON.stringify(a.message)}`;
    return '';
  }
  const e = expected.parsed;
  const a = actual.parsed;
  if (e.model !== a.model) return `model ${e.model} vs ${a.model}`;
  if (e.stream !== a.stream) return `stream ${e.stream} vs ${a.stream}`;
  if (e.route.session !== a.route.session) return `session ${e.route.session} vs ${a.route.session}`;
  // Object.is: -0 must have become 0 in both, and absent stays undefined (never NaN).
  if (!Object.is(e.priority, a.priority)) return `priority ${e.priority} vs ${a.priority}`;
  if (!Object.is(e.maxTokens, a.maxTokens)) return `maxTokens ${e.maxTokens} vs ${a.maxTokens}`;
  if (!sameIds(e.route.hashIds, a.route.hashIds)) return `ids ${e.route.hashIds} vs ${a.route.hashIds}`;
  if (e.route.inputTokens !== a.route.inputTokens)
    return `inputTokens ${e.route.inputTokens} vs ${a.route.inputTokens}`;
  if (e.route.blockTokens !== a.route.blockTokens)
    return `blockTokens ${e.route.blockTokens} vs ${a.route.blockTokens}`;
  if (e.route.messages !== undefined || e.route.prompt !== undefined || a.route.messages !== undefined)
    return 'a prompt left unhashed';
  if (!strip || e.body === bytes) {
    // Nothing to strip: both forward the very bytes they were given.
    if (e.body !== bytes || a.body !== bytes) return 'forwarded bytes are not the original';
  } else {
    const canon = (b: Buffer) => JSON.stringify(JSON.parse(b.toString('utf8')));
    if (canon(e.body) !== canon(a.body)) return `forwarded ${e.body} vs ${a.body}`;
  }
  return '';
}
