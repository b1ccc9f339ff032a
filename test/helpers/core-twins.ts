/**
 * The two routing cores side by side (the addon's NativeRouter and the ReferenceRouter), built on
 * one configuration with a buffer set each, for tests that drive the CoreRouter surface directly
 * (the event-fed index, which the public Router does not wire yet).
 */
import {
  DECISION_FIELDS,
  OFFLOAD_FIELDS,
  FLAG_TOKEN_KEYS,
  IDS_ARGUMENT,
  REQUEST_BLOCK_TOKENS,
  REQUEST_FIELDS,
  REQUEST_FLAGS,
  REQUEST_GROUP,
  REQUEST_IDS_KIND,
  REQUEST_INPUT_TOKENS,
  type CoreBuffers,
  type CoreConfig,
  type CoreRouter,
} from '../../src/core/core-router.js';
import { loadNative } from '../../src/core/native.js';
import { resolvePolicy, toCorePolicy } from '../../src/core/policy-spec.js';
import { ReferenceRouter } from '../../src/core/reference/reference-router.js';
import type { PolicyName } from '../../src/index.js';

export interface CoreUnderTest {
  name: 'native' | 'reference';
  core: CoreRouter;
  buffers: CoreBuffers;
  matched: Int32Array;
  scores: Float64Array;
}

export interface CoreRequest {
  /** NaN: the core's default (ids × blockTokens). */
  inputTokens?: number;
  /** FLAG_* bits; FLAG_TOKEN_KEYS by default. */
  flags?: number;
  blockTokens?: number;
}

export const MAX_SLOTS = 128;

export function makeCore(native: boolean, options: { policy?: PolicyName; blockTokens?: number } = {}): CoreUnderTest {
  const config: CoreConfig = {
    policy: toCorePolicy(resolvePolicy(options.policy ?? 'min_ttft')),
    blockTokens: options.blockTokens ?? 16,
    chunkBytes: 128,
    stalenessMs: 2000,
    maxSessions: 1024,
    manualClock: true,
    feedPath: null,
  };
  const buffers: CoreBuffers = {
    request: new Float64Array(REQUEST_FIELDS),
    decision: new Int32Array(DECISION_FIELDS),
    offload: new Float64Array(OFFLOAD_FIELDS),
    events: new Float64Array(1 + 2 * 64),
  };
  buffers.request[REQUEST_GROUP] = -1;
  buffers.request[REQUEST_BLOCK_TOKENS] = NaN;
  buffers.request[REQUEST_IDS_KIND] = IDS_ARGUMENT;
  const core = native ? new (loadNative().NativeRouter)(config, buffers) : new ReferenceRouter(config, buffers);
  const matched = new Int32Array(MAX_SLOTS);
  const scores = new Float64Array(MAX_SLOTS);
  core.setExplainBuffers(matched, scores);
  return { name: native ? 'native' : 'reference', core, buffers, matched, scores };
}

/** Writes a request's slab fields (token keys by default). */
export function setRequest(c: CoreUnderTest, req: CoreRequest = {}): void {
  c.buffers.request[REQUEST_INPUT_TOKENS] = req.inputTokens ?? NaN;
  c.buffers.request[REQUEST_FLAGS] = req.flags ?? FLAG_TOKEN_KEYS;
  c.buffers.request[REQUEST_BLOCK_TOKENS] = req.blockTokens ?? NaN;
}

/** match() of a request; returns the first `slots` entries of matched[]. */
export function matchOf(c: CoreUnderTest, ids: BigUint64Array, slots: number, req: CoreRequest = {}): number[] {
  setRequest(c, req);
  c.core.match(ids);
  return Array.from(c.matched.subarray(0, slots));
}
