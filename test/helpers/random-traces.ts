/**
 * Random requests' traces for the OTLP encoders' tests (test/otlp-proto.test.ts against the SDK's
 * serializer, test/otlp-native.test.ts the addon against TypeScript), and the comparison of decoded
 * spans whose own ids each encoder draws at random.
 */
import { RequestTrace } from '../../src/proxy/observe/request-trace.js';
import { parentFromHeaders } from '../../src/proxy/observe/trace-context.js';
import type { DecodedSpan } from './otlp-decode.js';
import type { Rng } from './random.js';

const WORDS = [
  'http://10.0.0.1:8000',
  'http://[::1]:9000',
  'not a url',
  'cache_hit',
  'Qwen/Qwen3-8B',
  'naïve ✓ 模型',
  'a"b\\c\n',
];

/** A request's trace made through its API, with random decisions, attempts, failures and answers. */
export function randomTrace(rng: Rng): RequestTrace {
  const parent = parentFromHeaders(
    rng.chance(0.5)
      ? `00-${rng.u64().toString(16).padStart(16, '1')}${rng.u64().toString(16).padStart(16, '2')}-${rng.u64().toString(16).padStart(16, '3')}-01`
      : '',
    rng.chance(0.3) ? 'vendor=abc,other=x1' : '',
  );
  const t = new RequestTrace(
    () => {},
    parent,
    'POST',
    rng.pick(['/v1/chat/completions', '/v1/messages', '/v1/responses']),
  );
  if (rng.chance(0.8)) t.model(rng.pick(WORDS));
  for (let a = rng.int(0, 3); a > 0; a--) {
    t.routed({
      instance: rng.pick(WORDS),
      reason: rng.pick(WORDS),
      matchedBlocks: rng.int(0, 5000),
      predictedCachedTokens: rng.chance(0.1) ? Number.MAX_SAFE_INTEGER : rng.int(0, 2 ** 31),
      predictedTtftMs: rng.chance(0.5) ? undefined : Math.round(rng.next() * 1e6) / 1000,
      keys: rng.pick(['tokens', 'text', 'hash_ids']),
      policy: rng.pick(['min_ttft', 'unified']),
    });
    t.attempt(rng.pick(WORDS));
    if (rng.chance(0.5)) t.firstByte();
    if (a > 1) t.attemptFailed(rng.pick(['connect', 'timeout']), rng.pick(WORDS));
  }
  const outcome = rng.pick(['success', 'error', 'interrupted', 'client_abort'] as const);
  t.end(
    rng.pick([200, 200, 400, 502]),
    outcome,
    rng.chance(0.5) ? { prompt_tokens: rng.int(0, 1e6), cached_tokens: rng.int(0, 1e6) } : undefined,
    rng.chance(0.5) ? rng.pick(WORDS) : undefined,
  );
  return t;
}

/** A decoded span with the SDK's defaults made explicit (it writes an UNSET status, kvroute omits it). */
export const normal = (s: DecodedSpan): DecodedSpan => ({ ...s, status: s.status ?? { code: 0, message: '' } });

/**
 * Spans with the ids each side makes for itself (requests', decisions') replaced by their position
 * in the body, in the span and in its children's parent: the tree compares, not the random ids.
 * Attempts' ids were made before (the engine got them) and must be equal as they are.
 */
export function byPosition(spans: DecodedSpan[]): DecodedSpan[] {
  const position = new Map(spans.map((s, i) => [s.spanId, `#${i}`]));
  return spans.map((s) => ({
    ...s,
    spanId: s.name === 'kvroute.upstream' ? s.spanId : position.get(s.spanId)!,
    parentSpanId: position.get(s.parentSpanId) ?? s.parentSpanId,
  }));
}

/**
 * A request's trace with no string of its own (no failure, no client `tracestate`): what the addon
 * encodes (src/proxy/observe/otlp-native.ts). Long words make spans past 16,383 bytes (a
 * three-byte length); numbers run from 0 to 2^53 − 1, and to doubles.
 */
export function plainTrace(rng: Rng): RequestTrace {
  const long = ['€'.repeat(5000), 'x'.repeat(4100)];
  const word = () => (rng.chance(0.05) ? rng.pick(long) : rng.pick(WORDS));
  const parent = parentFromHeaders(
    rng.chance(0.5)
      ? `00-${rng.u64().toString(16).padStart(16, '1')}${rng.u64().toString(16).padStart(16, '2')}-${rng.u64().toString(16).padStart(16, '3')}-01`
      : '',
    '',
  );
  const t = new RequestTrace(
    () => {},
    parent,
    rng.pick(['POST', 'GET']),
    rng.pick(['/v1/chat/completions', '/v1/responses']),
  );
  if (rng.chance(0.8)) t.model(word());
  for (let a = rng.int(0, 2); a > 0; a--) {
    t.routed({
      instance: word(),
      reason: word(),
      matchedBlocks: rng.pick([0, 1, 127, 128, 16_383, 16_384, rng.int(0, 5000)]),
      predictedCachedTokens: rng.pick([0, 2 ** 32, Number.MAX_SAFE_INTEGER, rng.int(0, 2 ** 31)]),
      predictedTtftMs: rng.pick([undefined, 0, 12, -1, 2 ** 53, Math.round(rng.next() * 1e6) / 1000]),
      keys: rng.pick(['tokens', 'text', 'hash_ids']),
      policy: rng.pick(['min_ttft', 'unified']),
    });
  }
  // Up to two attempts: a second one ends the first with no status and no failure (the addon's rows
  // then carry an attempt without a status).
  for (let a = rng.pick([0, 1, 1, 1, 1, 2]); a > 0; a--) {
    t.attempt(word());
    if (rng.chance(0.7)) t.firstByte();
  }
  t.end(
    rng.pick([200, 201, 400, 499]),
    rng.pick(['success', 'client_abort'] as const),
    rng.chance(0.6) ? { prompt_tokens: rng.int(0, 1e6), cached_tokens: rng.int(0, 1e6) } : undefined,
    undefined,
  );
  return t;
}
