/**
 * The offload protocol's bytes (offload-bodies.ts) on top of the top-level member splicer
 * (json-members.ts), against JSON.parse as the oracle: member ranges on hand-written and generated
 * bodies (whitespace, escapes, nesting, duplicate and escaped keys), the prefill and decode bodies,
 * the params read from a prefill answer, and the field stripped from decode answers, JSON and SSE
 * (an event cut at every byte).
 */
import { describe, expect, it } from 'vitest';

import { rebuildObject, topLevelMembers } from '../src/proxy/offload/json-members.js';
import {
  OffloadBodies,
  SseTransferParamsStripper,
  transferParamsOf,
  withoutTransferParams,
} from '../src/proxy/offload/offload-bodies.js';
import { Rng } from './helpers/random.js';

const PREFILL_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

const parse = (b: Buffer): Record<string, unknown> => JSON.parse(b.toString('utf8')) as Record<string, unknown>;

/** A random JSON value: strings full of quotes, backslashes, braces and non-ASCII; nested containers. */
function value(rng: Rng, depth: number): unknown {
  const kind = rng.int(0, depth > 3 ? 3 : 6);
  switch (kind) {
    case 0:
      return rng.pick([null, true, false]);
    case 1:
      return rng.pick([0, -1.5e-7, 123456789, 3.25]);
    case 2:
    case 3: {
      const alphabet = [
        'a',
        ' ',
        '"',
        '\\',
        '{',
        '}',
        '[',
        ']',
        ',',
        ':',
        '\n',
        'é',
        '😀',
        'kv_transfer_params',
        '\\"',
      ];
      let s = '';
      for (let i = rng.int(0, 12); i > 0; i--) s += rng.pick(alphabet);
      return s;
    }
    case 4:
    case 5:
      return Array.from({ length: rng.int(0, 4) }, () => value(rng, depth + 1));
    default:
      return object(rng, depth + 1);
  }
}

function object(rng: Rng, depth: number): Record<string, unknown> {
  const keys = [
    'model',
    'messages',
    'max_tokens',
    'stream',
    'stream_options',
    'min_tokens',
    'n',
    'x',
    'kv_transfer_params',
  ];
  const out: Record<string, unknown> = {};
  for (let i = rng.int(0, 6); i > 0; i--) out[rng.pick(keys) + (depth > 0 ? '_' : '')] = value(rng, depth);
  return out;
}

/** A generated request body with some of the members the prefill rewrites. */
function requestBody(rng: Rng): Record<string, unknown> {
  const body: Record<string, unknown> = { model: 'm', messages: [{ role: 'user', content: value(rng, 2) }] };
  for (const [key, v] of [
    ['max_tokens', 64],
    ['max_completion_tokens', 9],
    ['stream', true],
    ['stream_options', { include_usage: true }],
    ['min_tokens', 2],
    ['min_completion_tokens', 3],
    ['kv_transfer_params', { client: 1 }],
    ['temperature', 0.5],
    ['extra', object(rng, 1)],
  ] as const)
    if (rng.chance(0.5)) body[key] = v;
  return body;
}

const spaced = (rng: Rng, o: unknown): Buffer =>
  Buffer.from(
    `${rng.pick(['', ' ', '\n\t'])}${JSON.stringify(o, null, rng.pick([0, 1, '\t', ' \n ']))}${rng.pick(['', '\n'])}`,
  );

describe('topLevelMembers', () => {
  it('finds every top-level member of hand-written bodies, escapes and nesting skipped', () => {
    const cases = [
      '{}',
      ' { } ',
      '{"a":1}',
      '{ "a" : "x\\"}," , "b":[1,{"c":"]"}], "c" :{"d":{"e":[]}} ,"n":-1.5e+3,"t":true,"f":false,"z":null}',
      '{"s":"ends in a backslash \\\\","t":"\\\\\\"quoted\\\\\\"","u":"\\u0022"}',
      '{"max\\u005ftokens":5,"max_tokens":6}',
    ];
    for (const text of cases) {
      const bytes = Buffer.from(text);
      const members = topLevelMembers(bytes)!;
      expect(members, text).toBeDefined();
      const rebuilt: Record<string, unknown> = {};
      for (const m of members) {
        rebuilt[m.key] = JSON.parse(bytes.toString('utf8', m.valueStart, m.end));
        expect(JSON.parse(`{${bytes.toString('utf8', m.start, m.end)}}`)).toEqual({ [m.key]: rebuilt[m.key] });
      }
      expect(rebuilt, text).toEqual(JSON.parse(text));
    }
    // The escaped spelling is the same key, so both occurrences are found.
    expect(topLevelMembers(Buffer.from('{"max\\u005ftokens":5,"max_tokens":6}'))!.map((m) => m.key)).toEqual([
      'max_tokens',
      'max_tokens',
    ]);
  });

  it('answers undefined for what is not an object, or is cut short', () => {
    for (const text of ['', '[1]', '"s"', '{"a":1', '{"a":"x}', '{"a" 1}', '{a:1}', '{"a":1,}x', '{"a":[1,2}'])
      expect(topLevelMembers(Buffer.from(text)), text).toBeUndefined();
  });

  it('agrees with JSON.parse on 2,000 generated bodies, and a rebuild dropping nothing parses the same', () => {
    const rng = new Rng(18);
    for (let n = 0; n < 2000; n++) {
      const o = object(rng, 0);
      const bytes = spaced(rng, o);
      const members = topLevelMembers(bytes)!;
      expect(members).toBeDefined();
      expect(new Set(members.map((m) => m.key))).toEqual(new Set(Object.keys(o)));
      expect(parse(rebuildObject(bytes, members, new Set(), ''))).toEqual(o);
    }
  });
});

describe('the offload bodies', () => {
  it('prefill: max_tokens 1 (max_completion_tokens 1 when present), stream false, the rest as sent', () => {
    const rng = new Rng(7);
    for (let n = 0; n < 1000; n++) {
      const sent = requestBody(rng);
      const bodies = OffloadBodies.of(spaced(rng, sent))!;
      const {
        max_tokens: _maxTokens,
        max_completion_tokens: completionTokens,
        stream: _stream,
        stream_options: _options,
        min_tokens: _minTokens,
        min_completion_tokens: _minCompletion,
        kv_transfer_params: _params,
        ...rest
      } = sent;
      const expected: Record<string, unknown> = { ...rest, max_tokens: 1, stream: false };
      if (completionTokens !== undefined) expected.max_completion_tokens = 1;
      expected.kv_transfer_params = PREFILL_PARAMS;
      expect(parse(bodies.prefill())).toEqual(expected);
      const params = { do_remote_prefill: true, remote_engine_id: 'e"1', remote_block_ids: [1, 2] };
      expect(parse(bodies.decode(JSON.stringify(params)))).toEqual({ ...sent, kv_transfer_params: params });
    }
  });

  it('keeps the prompt bytes as they were sent (copied, never re-serialised)', () => {
    const body = Buffer.from(
      '{"model":"m","messages":[{"role":"user","content":"caf\\u00e9 \\/ 1.0e0"}],"max_tokens":8}',
    );
    const bodies = OffloadBodies.of(body)!;
    const prompt = '"messages":[{"role":"user","content":"caf\\u00e9 \\/ 1.0e0"}]';
    expect(bodies.prefill().toString()).toContain(prompt);
    expect(bodies.decode('{"a":1}').toString()).toBe(
      '{"model":"m","messages":[{"role":"user","content":"caf\\u00e9 \\/ 1.0e0"}],"max_tokens":8,"kv_transfer_params":{"a":1}}',
    );
    expect(OffloadBodies.of(Buffer.from('[1]'))).toBeUndefined();
  });

  it("reads the prefill answer's kv_transfer_params only when it is a non-empty object", () => {
    const params = '{"do_remote_prefill":true,"remote_engine_id":"p","remote_block_ids":[1,2]}';
    expect(transferParamsOf(Buffer.from(`{"id":"x","choices":[],"kv_transfer_params":${params}}`))).toBe(params);
    expect(transferParamsOf(Buffer.from(`{"kv_transfer_params" : ${params} ,"usage":{}}`))).toBe(params);
    for (const answer of [
      '{"id":"x"}',
      '{"kv_transfer_params":null}',
      '{"kv_transfer_params":[1]}',
      '{"kv_transfer_params":{}}',
      '{"kv_transfer_params":"x"}',
      '{"choices":[{"kv_transfer_params":{"a":1}}]}',
      'not json "kv_transfer_params"',
      '',
    ])
      expect(transferParamsOf(Buffer.from(answer)), answer).toBeUndefined();
  });

  it("strips a decode answer's top-level kv_transfer_params; an answer without one is the same Buffer", () => {
    const answer = Buffer.from('{"id":"x","choices":[{"text":"\\"kv_transfer_params\\""}],"kv_transfer_params":null}');
    expect(parse(withoutTransferParams(answer))).toEqual({ id: 'x', choices: [{ text: '"kv_transfer_params"' }] });
    const first = Buffer.from('{"kv_transfer_params":{"a":1},"id":"x"}');
    expect(withoutTransferParams(first).toString()).toBe('{"id":"x"}');
    const plain = Buffer.from('{"id":"x","usage":{"prompt_tokens":3}}');
    expect(withoutTransferParams(plain)).toBe(plain);
    const nested = Buffer.from('{"choices":[{"kv_transfer_params":1}]}');
    expect(withoutTransferParams(nested)).toBe(nested);
  });
});

describe('SseTransferParamsStripper', () => {
  const event = (o: object, eol = '\n') => `data: ${JSON.stringify(o)}${eol}${eol}`;
  const params = { do_remote_prefill: true, remote_engine_id: 'p' };
  const stream =
    event({ id: 1, choices: [{ delta: { content: 'a' } }], kv_transfer_params: params }) +
    event({ id: 2, choices: [{ delta: { content: 'kv_transfer_params' } }] }) +
    event({ id: 3, choices: [], usage: { prompt_tokens: 3 }, kv_transfer_params: null }, '\r\n') +
    'data: [DONE]\n\n';
  const expected =
    event({ id: 1, choices: [{ delta: { content: 'a' } }] }) +
    event({ id: 2, choices: [{ delta: { content: 'kv_transfer_params' } }] }) +
    event({ id: 3, choices: [], usage: { prompt_tokens: 3 } }, '\r\n') +
    'data: [DONE]\n\n';

  it('strips the field from every event, wherever the stream is cut into two reads', () => {
    const bytes = Buffer.from(stream);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const stripper = new SseTransferParamsStripper();
      const out = [stripper.feed(bytes.subarray(0, cut)), stripper.feed(bytes.subarray(cut))];
      const rest = stripper.flush();
      if (rest !== undefined) out.push(rest);
      expect(Buffer.concat(out).toString(), `cut at ${cut}`).toBe(expected);
    }
  });

  it('passes whole events without the field through as they came, and flushes an unterminated tail', () => {
    const stripper = new SseTransferParamsStripper();
    const whole = Buffer.from(event({ id: 1, choices: [] }));
    expect(stripper.feed(whole)).toBe(whole);
    expect(stripper.feed(Buffer.from('data: {"id":2')).length).toBe(0);
    expect(stripper.flush()?.toString()).toBe('data: {"id":2');
    expect(stripper.flush()).toBeUndefined();
  });
});
