/**
 * Flow control's body fields in both request paths (the native scanner behind scanRequest, sync
 * and threadpool, and hashParsedRequest(parseRequest(...))): the body's integer `priority` (vLLM's,
 * lower is handled earlier) and the output cap (chat: `max_completion_tokens` unless absent or
 * null, else `max_tokens`; completions: `max_tokens`). Each bad priority is a 400 invalid_field naming `priority`, with the same message
 * in both paths; a bad cap is ignored (the engine judges it); the body is forwarded untouched.
 * request-scan.test.ts holds the two paths together on generated bodies with these fields.
 */
import { describe, expect, it } from 'vitest';

import { hashParsedRequest, parseRequest } from '../src/proxy/exchange/request-inputs.js';
import { scanRequest, scanRequestAsync } from '../src/proxy/exchange/request-scan.js';

import { difference, settle, settleAsync, type Outcome } from './helpers/scan-outcome.js';

type Endpoint = 'chat' | 'completions';

/** The JavaScript path's outcome, after checking that the scanner (sync and async) agrees with it. */
async function both(endpoint: Endpoint, body: string, strip = false): Promise<Outcome> {
  const bytes = Buffer.from(body);
  const expected = settle(() => hashParsedRequest(parseRequest(endpoint, bytes, '', strip), 128));
  expect(
    difference(
      expected,
      settle(() => scanRequest(endpoint, bytes, '', strip)),
      bytes,
      strip,
    ),
    body,
  ).toBe('');
  expect(
    difference(expected, await settleAsync(() => scanRequestAsync(endpoint, bytes, '', strip)), bytes, strip),
    body,
  ).toBe('');
  return expected;
}

const chat = (fields: string) => `{"model":"m","messages":[{"role":"user","content":"hi"}]${fields}}`;
const completions = (fields: string) => `{"model":"m","prompt":"hi"${fields}}`;

async function parsed(endpoint: Endpoint, body: string) {
  const outcome = await both(endpoint, body);
  if (!outcome.ok) throw new Error(`refused: ${outcome.message}`);
  return outcome.parsed;
}

describe('the body’s priority', () => {
  it.each([
    ['-1', -1],
    ['0', 0],
    ['7', 7],
    ['-0', 0],
    ['1.0', 1],
    ['-2e1', -20],
    ['1e300', 1e300],
    ['-9223372036854775808', -9223372036854775808],
    ['null', undefined],
  ])('%s reads as %s in both paths', async (text, value) => {
    for (const endpoint of ['chat', 'completions'] as const) {
      const body = (endpoint === 'chat' ? chat : completions)(`,"priority":${text}`);
      const p = await parsed(endpoint, body);
      expect(Object.is(p.priority, value), `${endpoint} ${text}: ${p.priority}`).toBe(true);
      // Forwarded as the client sent it: vLLM reads the field itself.
      expect(p.body.toString()).toBe(body);
    }
  });

  it('is undefined when absent, and the last of duplicates wins', async () => {
    expect((await parsed('chat', chat(''))).priority).toBeUndefined();
    expect((await parsed('chat', chat(',"priority":"x","priority":-3'))).priority).toBe(-3);
  });

  it.each([
    ['a string', '"x"', '"x"'],
    ['a numeric string', '"1"', '"1"'],
    ['a float', '1.5', '1.5'],
    ['a tiny float', '-1e-7', '-1e-7'],
    ['true', 'true', 'true'],
    ['false', 'false', 'false'],
    ['an array', '[1]', 'an array'],
    ['an object', '{"value":1}', 'an object'],
  ])('%s is a 400 invalid_field naming priority, in both paths', async (_name, text, shown) => {
    for (const endpoint of ['chat', 'completions'] as const) {
      const outcome = await both(endpoint, (endpoint === 'chat' ? chat : completions)(`,"priority":${text}`));
      expect(outcome).toEqual({
        ok: false,
        status: 400,
        code: 'invalid_field',
        param: 'priority',
        message: `priority must be an integer (lower is handled earlier), got ${shown}`,
      });
    }
  });

  it('is checked after the required fields and before hash_ids and the prompt’s contents', async () => {
    const bad = ',"priority":"x"';
    expect(await both('chat', `{"model":"m"${bad}}`)).toMatchObject({ code: 'missing_field', param: 'messages' });
    expect(await both('chat', `{"model":"m","messages":[5]${bad}}`)).toMatchObject({ param: 'priority' });
    expect(await both('chat', `{"model":"m","messages":[],"hash_ids":[-1]${bad}}`)).toMatchObject({
      param: 'priority',
    });
    expect(await both('completions', `{"model":"m","prompt":[{"toString":1}]${bad}}`)).toMatchObject({
      param: 'priority',
    });
  });
});

describe('the output cap: max_completion_tokens, else max_tokens', () => {
  it.each([
    [',"max_tokens":100', 100],
    [',"max_tokens":0', 0],
    [',"max_tokens":-0', 0],
    [',"max_tokens":64.0', 64],
    [',"max_completion_tokens":50,"max_tokens":100', 50],
    [',"max_tokens":100,"max_completion_tokens":50', 50],
    [',"max_completion_tokens":null,"max_tokens":100', 100],
    [',"max_completion_tokens":0,"max_tokens":100', 0],
    ['', undefined],
  ])('%s: %s', async (fields, cap) => {
    const p = await parsed('chat', chat(fields));
    expect(Object.is(p.maxTokens, cap), `${p.maxTokens}`).toBe(true);
  });

  it('on completions is max_tokens alone: vLLM’s CompletionRequest has no max_completion_tokens', async () => {
    expect((await parsed('completions', completions(',"max_completion_tokens":5,"max_tokens":100'))).maxTokens).toBe(
      100,
    );
    expect((await parsed('completions', completions(',"max_completion_tokens":5'))).maxTokens).toBeUndefined();
    expect((await parsed('completions', completions(',"max_tokens":0'))).maxTokens).toBe(0);
  });

  it.each([
    ',"max_tokens":"100"',
    ',"max_tokens":-1',
    ',"max_tokens":1.5',
    ',"max_tokens":true',
    ',"max_tokens":null',
    ',"max_tokens":[100]',
    // The engine reads max_completion_tokens when it is set, so a bad one is no cap at all.
    ',"max_completion_tokens":"x","max_tokens":100',
    ',"max_completion_tokens":-5,"max_tokens":100',
  ])('%s is ignored (no cap; the engine judges it), not refused', async (fields) => {
    // max_completion_tokens is chat's field only (completions reads max_tokens, tested above).
    const endpoints = fields.includes('max_completion_tokens')
      ? (['chat'] as const)
      : (['chat', 'completions'] as const);
    for (const endpoint of endpoints) {
      const body = (endpoint === 'chat' ? chat : completions)(fields);
      const p = await parsed(endpoint, body);
      expect(p.maxTokens).toBeUndefined();
      expect(p.body.toString()).toBe(body);
    }
  });
});
