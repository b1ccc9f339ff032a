/**
 * The attributes of a request's spans (docs/tracing.md), in one place: the OTLP encoder
 * (otlp-proto.ts) and the conversion for an embedder's exporter (readable-spans.ts) both walk
 * them here, so the two never disagree. Each function calls `visit` once per attribute, in order.
 *
 * Attributes that depend only on a request's route, or an attempt's instance, are visited first, by
 * functions of their own (routeAttributes, instanceAttributes): the encoder caches each such group
 * as one block of bytes.
 *
 * Keys are AttributeKey objects, not strings: each has a small `index`, so an encoder keeps its
 * per-key tables (the key's encoding, its values' encodings) in arrays and finds them without a
 * lookup by name.
 */
import type { AttemptSpan, RequestTrace, RoutedSpan } from './request-trace.js';

export interface AttributeKey {
  readonly name: string;
  /** 0, 1, 2, … in order of definition: below attributeKeyCount. */
  readonly index: number;
}

export type Visit = (key: AttributeKey, value: string | number) => void;

const keys: AttributeKey[] = [];
function attributeKey(name: string): AttributeKey {
  const key = { name, index: keys.length };
  keys.push(key);
  return key;
}

const METHOD = attributeKey('http.request.method');
const URL_PATH = attributeKey('url.path');
const HTTP_ROUTE = attributeKey('http.route');
export const REQUEST_MODEL = attributeKey('gen_ai.request.model');
export const STATUS_CODE = attributeKey('http.response.status_code');
export const OUTCOME = attributeKey('kvroute.outcome');
export const INPUT_TOKENS = attributeKey('gen_ai.usage.input_tokens');
export const CACHED_TOKENS = attributeKey('kvroute.usage.cached_tokens');
export const INSTANCE = attributeKey('kvroute.instance');
export const REASON = attributeKey('kvroute.reason');
export const MATCHED_BLOCKS = attributeKey('kvroute.matched_blocks');
export const PREDICTED_CACHED_TOKENS = attributeKey('kvroute.predicted_cached_tokens');
export const KEYS = attributeKey('kvroute.keys');
export const POLICY = attributeKey('kvroute.policy');
export const PREDICTED_TTFT_MS = attributeKey('kvroute.predicted_ttft_ms');
export const ATTEMPT = attributeKey('kvroute.attempt');
const SERVER_ADDRESS = attributeKey('server.address');
const SERVER_PORT = attributeKey('server.port');
const ERROR_TYPE = attributeKey('error.type');

/** How many keys there are (their indexes are below it). */
export const attributeKeyCount = keys.length;

/** `server.address` and `server.port` of an instance URL, parsed once per instance. */
const servers = new Map<string, { address: string; port: number } | null>();
function serverOf(instance: string): { address: string; port: number } | null {
  let known = servers.get(instance);
  if (known === undefined) {
    try {
      const url = new URL(instance);
      known = { address: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) };
    } catch {
      known = null;
    }
    if (servers.size >= 4096) servers.clear(); // instances come and go (discovery): stay bounded
    servers.set(instance, known);
  }
  return known;
}

/**
 * A request's attributes that depend on its method and route alone: an encoder writes them as one
 * block, encoded once per route.
 */
export function routeAttributes(method: string, route: string, visit: Visit): void {
  visit(METHOD, method);
  visit(URL_PATH, route);
  visit(HTTP_ROUTE, route);
}

/** A request's other attributes (after routeAttributes'). */
export function requestOwnAttributes(t: RequestTrace, visit: Visit): void {
  if (t.requestModel !== '') visit(REQUEST_MODEL, t.requestModel);
  visit(STATUS_CODE, t.status);
  visit(OUTCOME, t.outcome);
  if (t.usage !== undefined) {
    visit(INPUT_TOKENS, t.usage.prompt_tokens);
    visit(CACHED_TOKENS, t.usage.cached_tokens);
  }
}

export function requestAttributes(t: RequestTrace, visit: Visit): void {
  routeAttributes(t.method, t.route, visit);
  requestOwnAttributes(t, visit);
}

export function routedAttributes(f: RoutedSpan, visit: Visit): void {
  visit(INSTANCE, f.instance);
  visit(REASON, f.reason);
  visit(MATCHED_BLOCKS, f.matchedBlocks);
  visit(PREDICTED_CACHED_TOKENS, f.predictedCachedTokens);
  visit(KEYS, f.keys);
  visit(POLICY, f.policy);
  if (f.predictedTtftMs !== undefined) visit(PREDICTED_TTFT_MS, f.predictedTtftMs);
}

/**
 * An attempt's attributes that depend on its instance alone: an encoder writes them as one block,
 * encoded once per instance.
 */
export function instanceAttributes(instance: string, visit: Visit): void {
  visit(INSTANCE, instance);
  const server = serverOf(instance);
  if (server !== null) {
    visit(SERVER_ADDRESS, server.address);
    visit(SERVER_PORT, server.port);
  }
}

/** An attempt's other attributes (after instanceAttributes'). */
export function attemptOwnAttributes(a: AttemptSpan, visit: Visit): void {
  visit(ATTEMPT, a.number);
  if (a.status !== 0) visit(STATUS_CODE, a.status);
  if (a.errorType !== '') visit(ERROR_TYPE, a.errorType);
}

export function attemptAttributes(a: AttemptSpan, visit: Visit): void {
  instanceAttributes(a.instance, visit);
  attemptOwnAttributes(a, visit);
}

/** A span's status: the request's when it failed (a 5xx, a cut stream), an attempt's when it failed. */
export const requestStatusMessage = (t: RequestTrace): string => (t.error !== '' ? t.error : t.outcome);
