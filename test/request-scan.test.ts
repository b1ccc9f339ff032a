/**
 * The native request scanner against the JavaScript path it replaces: for thousands of generated
 * bodies (chat and completions; unicode, escapes, control characters, content parts, tool calls,
 * duplicate and array-index keys, numbers at the edges of double formatting; hash_ids valid and
 * not; stream and user variants; whitespace) and malformed mutations of them (truncation, byte
 * flips, invalid UTF-8, a BOM, nesting around the limit), scanRequest (sync), scanRequestAsync
 * (threadpool) and hashParsedRequest(parseRequest(...)) must agree: the same ClientError status,
 * code, param and message (JSON syntax detail excepted), or the same model, stream, session, ids
 * (bit for bit), token counts and forwarded bytes, with --strip-extensions on and off. Then each
 * fallback and each rule both paths now share, a multi-MB body on the threadpool, and the scanner
 * in worker threads.
 */
import { Piscina } from 'piscina';
import { describe, expect, it } from 'vitest';

import { scanBody, scanBodyAsync } from '../src/core/request-scanner.js';
import { ClientError } from '../src/proxy/server/error-body.js';
import {
  hashParsedRequest,
  MAX_JSON_DEPTH,
  parseRequest,
  type ParsedRequest,
} from '../src/proxy/exchange/request-inputs.js';
import { scanRequest, scanRequestAsync } from '../src/proxy/exchange/request-scan.js';

import { Rng } from './helpers/random.js';
import { difference, settle, settleAsync, type Outcome } from './helpers/scan-outcome.js';
import { mutate, nested, obj, randomText, requestBody, str, write, type Json } from './helpers/request-gen.js';

type Endpoint = 'chat' | 'completions';

/** Atomics.waitAsync (Node 16+), which the ES2023 lib does not declare. */
const waitAsync = (Atomics as unknown as { waitAsync(a: Int32Array, i: number, v: number): { value: unknown } })
  .waitAsync;

const CHUNKS = [128, 128, 128, 16, 1, 7, 4096];

describe('request scanner: differential against parseRequest + promptText + the router hashing', () => {
  it('agrees on thousands of generated and mutated bodies, sync and async, strip on and off', async () => {
    const rng = new Rng(Number(process.env.SCAN_SEED ?? 20261201));
    const counts: Record<string, number> = {};
    const count = (key: string) => (counts[key] = (counts[key] ?? 0) + 1);
    const failures: string[] = [];
    const BODIES = 5000;
    for (let n = 0; n < BODIES && failures.length < 5; n++) {
      const generated = requestBody(rng);
      const text = write(rng, generated.value);
      const cases: { kind: string; bytes: Buffer }[] = [{ kind: 'generated', bytes: Buffer.from(text) }];
      if (rng.chance(0.5)) cases.push(mutate(rng, cases[0]!.bytes));
      for (const { kind, bytes } of cases) {
        const endpoint: Endpoint = rng.chance(0.9) ? generated.endpoint : rng.pick(['chat', 'completions']);
        const header = rng.chance(0.2) ? 'session-header' : '';
        const chunk = rng.pick(CHUNKS);
        for (const strip of [false, true]) {
          const expected = settle(() => hashParsedRequest(parseRequest(endpoint, bytes, header, strip), chunk));
          const scanned = scanBody(endpoint, bytes, chunk, strip);
          count(
            `${kind}:${scanned.kind === 'error' ? `error:${scanned.code}` : scanned.kind === 'fallback' ? `fallback:${scanned.reason}` : 'ok'}`,
          );
          if (scanned.kind === 'error' && scanned.param === 'priority') count(`${kind}:error:priority`);
          if (scanned.kind === 'ok' && scanned.priority !== undefined) count(`${kind}:ok:priority`);
          if (scanned.kind === 'ok' && scanned.maxTokens !== undefined) count(`${kind}:ok:maxTokens`);
          const sync = settle(() => scanRequest(endpoint, bytes, header, strip, chunk));
          const threaded = await settleAsync(() => scanRequestAsync(endpoint, bytes, header, strip, chunk));
          for (const [name, actual] of [
            ['sync', sync],
            ['async', threaded],
          ] as const) {
            const diff = difference(expected, actual, bytes, strip);
            if (diff !== '')
              failures.push(
                `${name} ${endpoint} chunk=${chunk} strip=${strip} ${kind}: ${diff}\n  body: ${JSON.stringify(bytes.toString('latin1')).slice(0, 600)}`,
              );
          }
        }
      }
    }
    if (process.env.SCAN_COUNTS) console.log(counts);
    expect(failures).toEqual([]);
    // The generator reaches every outcome, and the scanner itself (not its fallback) answers most.
    expect(counts['generated:ok']).toBeGreaterThan(BODIES);
    for (const key of [
      'generated:error:missing_field',
      'generated:error:invalid_field',
      'utf8:error:invalid_json',
      'generated:error:priority',
      'generated:ok:priority',
      'generated:ok:maxTokens',
    ])
      expect(counts[key], key).toBeGreaterThan(10);
    const fallbacks = Object.entries(counts)
      .filter(([k]) => k.includes('fallback'))
      .reduce((s, [, v]) => s + v, 0);
    expect(fallbacks).toBeLessThan(BODIES * 0.1);
  });

  it('agrees on bodies nesting around the depth limit, anywhere in the body', async () => {
    for (const depth of [MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 3000]) {
      // The body is level 1; nested(n) is n arrays around a scalar, which counts as a level too.
      const places: Json[] = [
        obj(['model', str('m')], ['messages', []], ['metadata', nested(depth - 2)]),
        obj(['model', str('m')], ['messages', [obj(['role', str('user')], ['content', [nested(depth - 5)]])]]),
        obj(['model', str('m')], ['prompt', nested(depth - 2)]),
        obj(['model', str('m')], ['messages', []], ['x', nested(depth - 2)], ['y', [[{ obj: [] }]]]),
      ];
      for (const [k, value] of places.entries()) {
        const endpoint = k === 2 ? 'completions' : 'chat';
        if (k === 3 && depth < 5) continue;
        const bytes = Buffer.from(write(new Rng(depth), value));
        const expected = settle(() => hashParsedRequest(parseRequest(endpoint, bytes, '', false), 128));
        expect(expected.ok, `depth ${depth} place ${k}`).toBe(depth <= MAX_JSON_DEPTH);
        expect(
          difference(
            expected,
            settle(() => scanRequest(endpoint, bytes, '', false)),
            bytes,
            false,
          ),
        ).toBe('');
        expect(
          difference(expected, await settleAsync(() => scanRequestAsync(endpoint, bytes, '', false)), bytes, false),
        ).toBe('');
      }
    }
  });
});

/** Both paths, sync and async, on one body; returns the JavaScript path's outcome. */
async function both(endpoint: Endpoint, body: string | Buffer, strip = false, header = ''): Promise<Outcome> {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  const expected = settle(() => hashParsedRequest(parseRequest(endpoint, bytes, header, strip), 128));
  expect(
    difference(
      expected,
      settle(() => scanRequest(endpoint, bytes, header, strip)),
      bytes,
      strip,
    ),
  ).toBe('');
  expect(
    difference(expected, await settleAsync(() => scanRequestAsync(endpoint, bytes, header, strip)), bytes, strip),
  ).toBe('');
  return expected;
}

function errorOf(outcome: Outcome) {
  expect(outcome.ok).toBe(false);
  const { status, code, param, message } = outcome as Extract<Outcome, { ok: false }>;
  return { status, code, param, message };
}

describe('request scanner: exhaustive small cases', () => {
  it('agrees on every byte value at every kind of position', async () => {
    const template = '{"model":"m",@"messages":[{"role":"u@","content":[@1@,"x"]@}]@}@';
    const slots = [...template.matchAll(/@/g)].map((m) => m.index);
    const base = template.replaceAll('@', '');
    for (let b = 0; b < 256; b++) {
      for (const [k, at] of slots.entries()) {
        const offset = at - k; // the earlier slots' markers are gone from `base`
        const bytes = Buffer.concat([
          Buffer.from(base.slice(0, offset)),
          Buffer.from([b]),
          Buffer.from(base.slice(offset)),
        ]);
        const expected = settle(() => hashParsedRequest(parseRequest('chat', bytes, '', false), 128));
        const diff = difference(
          expected,
          settle(() => scanRequest('chat', bytes, '', false)),
          bytes,
          false,
        );
        expect(diff, `byte 0x${b.toString(16)} at ${offset}`).toBe('');
      }
    }
  });

  it('agrees on number spellings at the edges of the grammar and of double range', async () => {
    const spellings = [
      '0',
      '-0',
      '0.0',
      '-0.0',
      '0e0',
      '-0E-0',
      '0e+5',
      '1E400',
      '-1E400',
      '1e-400',
      '-1e-400',
      '1.5E-400',
      '2.2250738585072011e-308',
      '2.2250738585072012e-308',
      '4.9406564584124654e-324',
      '2.4703282292062327e-324',
      '2.4703282292062328e-324',
      '1.7976931348623158e308',
      '1.7976931348623159e308',
      '9007199254740993',
      '9223372036854775807',
      '9223372036854775808',
      '-9223372036854775808',
      '-9223372036854775809',
      '18446744073709551615',
      '18446744073709551616',
      '0.1e1',
      '100e-2',
      '123456789012345678901234567890e-10',
      '0.000000000000000000000000000001',
      '1e21',
      '1e-7',
      '123e20',
      '01',
      '-01',
      '1.',
      '.1',
      '+1',
      '1e',
      '1e+',
      '-',
      '--1',
      '1.e5',
      '0x10',
      'NaN',
      'Infinity',
      '1_000',
    ];
    for (const n of spellings) {
      for (const body of [
        `{"model":"m","messages":[{"role":"u","content":[${n}],"tool_calls":{"a":${n}}}]}`,
        `{"model":"m","messages":[],"hash_ids":[${n}]}`,
        `{"model":"m","messages":[{"role":${n}}]}`,
      ]) {
        expect((await both('chat', body)).ok !== undefined, body).toBe(true);
      }
      expect((await both('completions', `{"model":"m","prompt":[${n},[${n}]]}`)).ok !== undefined).toBe(true);
    }
  });
});

describe('request scanner: fallbacks to the JavaScript path', () => {
  it.each([
    ['1e400 (beyond double)', '{"model":"m","messages":[],"temperature":1e400}'],
    ['-1e400 in a tool call', '{"model":"m","messages":[{"role":"a","tool_calls":[-1e400]}]}'],
    ['an integer beyond 64 bits', '{"model":"m","messages":[],"seed":123456789012345678901234567890}'],
    ['2^64', '{"model":"m","prompt":[18446744073709551616],"x":1}'],
  ])('%s: number_range', async (_name, body) => {
    const endpoint = body.includes('"prompt"') ? 'completions' : 'chat';
    expect(scanBody(endpoint, Buffer.from(body), 128, false)).toEqual({ kind: 'fallback', reason: 'number_range' });
    expect((await both(endpoint, body)).ok).toBe(true);
  });

  it('an unpaired surrogate escape: lone_surrogate; the prompt hashes it as U+FFFD', async () => {
    for (const s of ['\\ud800', '\\udc00x', 'a\\ud83d', '\\ud83d\\u0041', '\\udfff\\ud800']) {
      const body = `{"model":"m","messages":[{"role":"user","content":"${s}"}]}`;
      expect(scanBody('chat', Buffer.from(body), 128, false)).toEqual({ kind: 'fallback', reason: 'lone_surrogate' });
      const outcome = await both('chat', body);
      expect(outcome.ok).toBe(true);
    }
    // A lone surrogate in an error message's value: the fallback gives JavaScript's message.
    const bad = errorOf(
      await both('chat', '{"model":"m","messages":[{"role":"user","content":"x","name":5,"n":"\\ud800"}]}'),
    );
    expect(bad).toMatchObject({
      code: 'invalid_field',
      param: 'messages',
      message: 'messages[0].name must be a string, got 5',
    });
  });

  it('a malformed number or escape is an error, not a fallback', async () => {
    for (const body of [
      '{"model":"m","messages":[],"t":01}',
      '{"model":"m","messages":[],"t":1.}',
      '{"model":"m","messages":[],"t":-}',
      '{"model":"m","messages":["\\x"]}',
      '{"model":"m","messages":["\\u12g4"]}',
    ]) {
      const scanned = scanBody('chat', Buffer.from(body), 128, false);
      expect(scanned, body).toMatchObject({ kind: 'error', code: 'invalid_json', param: null });
      expect(errorOf(await both('chat', body)).code).toBe('invalid_json');
    }
  });
});

describe('request scanner: rules both paths share', () => {
  it('invalid UTF-8 is a 400 invalid_json in both (no U+FFFD decoding)', async () => {
    const good = Buffer.from('{"model":"m","messages":[{"role":"user","content":"ab"}]}');
    const at = good.indexOf('ab') + 1;
    for (const bad of [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf4, 0x90, 0x80, 0x80]]) {
      const body = Buffer.concat([good.subarray(0, at), Buffer.from(bad), good.subarray(at)]);
      expect(errorOf(await both('chat', body))).toEqual({
        status: 400,
        code: 'invalid_json',
        param: null,
        message: 'the request body is not valid UTF-8',
      });
    }
    // Invalid UTF-8 wins over a syntax error after it, in both.
    const twice = Buffer.concat([Buffer.from('{"model":"'), Buffer.from([0xff]), Buffer.from('", ]')]);
    expect(errorOf(await both('chat', twice)).message).toBe('the request body is not valid UTF-8');
  });

  it(`nesting deeper than ${MAX_JSON_DEPTH} levels is a 400 invalid_json in both, and no longer a 500`, async () => {
    // A content part deeper than JSON.stringify can write threw a RangeError (a 500) before.
    const deep = `{"model":"m","messages":[{"role":"user","content":[${'['.repeat(20_000)}${']'.repeat(20_000)}]}]}`;
    const error = errorOf(await both('chat', deep));
    expect(error).toEqual({
      status: 400,
      code: 'invalid_json',
      param: null,
      message: `the request body is not valid JSON: it nests deeper than ${MAX_JSON_DEPTH} levels`,
    });
    expect(() => parseRequest('chat', Buffer.from(deep), '', false)).toThrow(ClientError);
    const limit = `{"model":"m","messages":[],"x":${'['.repeat(MAX_JSON_DEPTH - 1)}${']'.repeat(MAX_JSON_DEPTH - 1)}}`;
    expect((await both('chat', limit)).ok).toBe(true);
  });

  it('an empty body, whose bytes have no memory at all, is a 400 invalid_json in both', async () => {
    // A zero-length array's data pointer is null; the scanner handed it to memcpy, undefined
    // behaviour that the ASan/UBSan addon leg (scripts/asan-addon-test.sh) stops on.
    for (const empty of [Buffer.alloc(0), Buffer.from(new Uint8Array(0).buffer), Buffer.from('')]) {
      expect(errorOf(await both('chat', empty))).toMatchObject({ status: 400, code: 'invalid_json' });
      expect(errorOf(await both('completions', empty))).toMatchObject({ status: 400, code: 'invalid_json' });
    }
  });

  it('a UTF-8 byte-order mark is invalid JSON in both (simdjson alone would skip it)', async () => {
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"model":"m","messages":[]}')]);
    expect(errorOf(await both('chat', body)).code).toBe('invalid_json');
  });

  it('a hash_ids value -0 is the id 0 in both', async () => {
    const outcome = await both('chat', '{"model":"m","messages":[],"hash_ids":[-0,-0.0,1.0,1e3]}');
    expect(outcome.ok && Array.from(outcome.parsed.route.hashIds as Float64Array, (x) => Object.is(x, -0))).toEqual([
      false,
      false,
      false,
      false,
    ]);
  });

  it('a prompt array holding an object with a toString member is a 400 invalid_field in both, not a 500', async () => {
    for (const body of [
      '{"model":"m","prompt":[1,{"toString":1}]}',
      '{"model":"m","prompt":[[[{"valueOf":2,"toString":"x"}]]]}',
    ]) {
      expect(errorOf(await both('completions', body))).toEqual({
        status: 400,
        code: 'invalid_field',
        param: 'prompt',
        message: 'prompt cannot be converted to text: an object in it has a toString member',
      });
    }
    expect((await both('completions', '{"model":"m","prompt":[{"valueOf":1},{"a":1}]}')).ok).toBe(true);
  });

  it("promptText's refusals are 400 invalid_field on messages, with its messages, up front", async () => {
    const cases: [string, string][] = [
      ['[5]', 'messages[0] must be an object, got 5'],
      ['[{"role":"u"},null]', 'messages[1] must be an object, got null'],
      ['[{"content":"x"}]', 'messages[0].role must be a string, got undefined'],
      ['[{"role":1e21}]', 'messages[0].role must be a string, got 1e+21'],
      ['[{"role":["x"]}]', 'messages[0].role must be a string, got an array'],
      ['[{"role":"u","content":{}}]', 'messages[0].content must be a string, an array of parts or null, got an object'],
      ['[{"role":"u","content":true}]', 'messages[0].content must be a string, an array of parts or null, got true'],
      ['[{"role":"u","name":null}]', 'messages[0].name must be a string, got null'],
      ['[{"role":"u","tool_call_id":-0}]', 'messages[0].tool_call_id must be a string, got 0'],
      ['[{"role":"u","content":"x","role":{"a":1}}]', 'messages[0].role must be a string, got an object'],
    ];
    for (const [messages, message] of cases) {
      const body = `{"model":"m","messages":${messages}}`;
      expect(errorOf(await both('chat', body))).toEqual({
        status: 400,
        code: 'invalid_field',
        param: 'messages',
        message,
      });
    }
    // describe() cuts a long string at 40 UTF-16 units, even inside a surrogate pair.
    const long = `${'x'.repeat(39)}😀tail`;
    const error = errorOf(await both('chat', `{"model":"m","messages":[${JSON.stringify(long)}]}`));
    expect(error.message).toBe(`messages[0] must be an object, got "${'x'.repeat(39)}\\ud83d…"`);
    const short = errorOf(await both('chat', `{"model":"m","messages":[{"role":"u"},"${'é'.repeat(40)}"]}`));
    expect(short.message).toBe(`messages[1] must be an object, got "${'é'.repeat(40)}"`);
  });

  it('a prompt of more than 2^24 - 1 blocks is a 400 invalid_field in both', async () => {
    const text = 'a'.repeat(2 ** 24);
    const body = Buffer.from(`{"model":"m","prompt":"${text}"}`);
    const expected = settle(() => hashParsedRequest(parseRequest('completions', body, '', false), 1));
    expect(errorOf(expected)).toEqual({
      status: 400,
      code: 'invalid_field',
      param: 'prompt',
      message: 'prompt is too long: more than 16777215 blocks',
    });
    expect(
      difference(
        expected,
        settle(() => scanRequest('completions', body, '', false, 1)),
        body,
        false,
      ),
    ).toBe('');
    const fits = Buffer.from(`{"model":"m","prompt":"${text.slice(1)}"}`);
    const ok = scanBody('completions', fits, 1, false);
    expect(ok.kind === 'ok' && ok.ids.hashIds.length).toBe(2 ** 24 - 1);
  });
});

describe('request scanner: what it reads and forwards', () => {
  it('writes content parts and tool calls as JSON.stringify: key order, duplicates, numbers, escapes', async () => {
    const body =
      '{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},' +
      '{"type":"image","b":1,"2":2,"1":[1e21,1e-7,-0,0.1,5e-324,1E+2,123456789012345678e3],"b":"\\u0001\\u001f\\u007f\\u2028\\ud83d\\ude00\\/"},' +
      '{"text":"t","type":"text","type":"x"}],"tool_calls":[{"function":{"arguments":"{\\"a\\": 1}"},"id":"c","4294967295":0,"4294967294":0}]}]}';
    const outcome = await both('chat', body);
    expect(outcome.ok).toBe(true);
  });

  it('strips every hash_ids member with its comma, wherever it stands', async () => {
    const bodies = [
      '{"hash_ids":[1,2],"model":"m","messages":[]}',
      '{"model":"m", "hash_ids" : [1,2] ,"messages":[]}',
      '{"model":"m","messages":[],"hash_ids":[3]}',
      '{ "hash_ids":[1] , "hash_ids":[2], "model":"m","messages":[] , "hash_ids":[3] }',
      '{"model":"m","hash\\u005fids":[4],"messages":[]}',
      '{"model":"m","messages":[{"role":"u","content":"\\"hash_ids\\":[9],"}],"hash_ids":[5],"x":{"hash_ids":[6]}}',
    ];
    for (const body of bodies) {
      const outcome = await both('chat', body, true);
      expect(outcome.ok).toBe(true);
      const forwarded = scanRequest('chat', Buffer.from(body), '', true).body.toString();
      const value = JSON.parse(forwarded) as Record<string, unknown>;
      expect(value.hash_ids, body).toBeUndefined();
      expect(value.model).toBe('m');
    }
    // Without --strip-extensions, or without hash_ids, the original bytes go upstream.
    const bytes = Buffer.from(bodies[0]!);
    expect(scanRequest('chat', bytes, '', false).body).toBe(bytes);
    const plain = Buffer.from('{"model":"m","messages":[]}');
    expect(scanRequest('chat', plain, '', true).body).toBe(plain);
  });

  it('reads model, stream, user and the session header as parseRequest does', async () => {
    const outcome = await both('chat', '{"model":"q","messages":[],"stream":true,"user":"alice"}');
    expect(outcome.ok && [outcome.parsed.model, outcome.parsed.stream, outcome.parsed.route.session]).toEqual([
      'q',
      true,
      'alice',
    ]);
    const header = await both('chat', '{"model":"q","messages":[],"stream":"true","user":"alice"}', false, 'hdr');
    expect(header.ok && [header.parsed.stream, header.parsed.route.session]).toEqual([false, 'hdr']);
    const noUser = await both('chat', '{"model":"q","messages":[],"user":""}');
    expect(noUser.ok && 'session' in noUser.parsed.route).toBe(false);
  });

  it('scans a multi-MB body on the threadpool, equal to the JavaScript path', async () => {
    const line = 'def handler(request):\n    return compute(request.body)  # agentic context line é 😀\n';
    const messages = Array.from({ length: 80 }, (_, i) => ({
      role: i % 2 === 0 ? 'user' : 'assistant',
      content:
        i % 5 === 0
          ? [
              { type: 'text', text: line.repeat(800) },
              { type: 'image_url', image_url: { url: 'x' } },
            ]
          : line.repeat(600),
      ...(i % 7 === 3 ? { tool_calls: [{ id: `c${i}`, function: { name: 'f', arguments: '{"n": 1.5e300}' } }] } : {}),
    }));
    const body = Buffer.from(JSON.stringify({ model: 'm', messages, stream: true }));
    expect(body.length).toBeGreaterThan(4 * 2 ** 20);
    const pending = scanRequestAsync('chat', body, 's', false);
    const expected = settle(() => hashParsedRequest(parseRequest('chat', body, 's', false), 128));
    expect(difference(expected, await settleAsync(() => pending), body, false)).toBe('');
    expect(expected.ok && expected.parsed.route.hashIds!.length).toBeGreaterThan(30_000);
    // With hash_ids and --strip-extensions, the worker writes the stripped body.
    const withIds = Buffer.from(JSON.stringify({ hash_ids: [1, 2, 3], model: 'm', messages }));
    const stripped = await scanRequestAsync('chat', withIds, '', true);
    expect(stripped.body.length).toBe(withIds.length - '"hash_ids":[1,2,3],'.length);
    expect(
      difference(
        settle(() => parseRequest('chat', withIds, '', true)),
        { ok: true, parsed: stripped },
        withIds,
        true,
      ),
    ).toBe('');
  });

  it('refuses what is not a body before the threadpool sees it', async () => {
    expect(() => scanBody('chat', 'x' as unknown as Uint8Array, 128, false)).toThrow(TypeError);
    await expect(scanBodyAsync('chat', Buffer.from('{}'), 0, false)).rejects.toThrow(RangeError);
  });
});

describe('request scanner in worker threads', () => {
  const rng = new Rng(99);
  const bodies = Array.from({ length: 30 }, (_, k) =>
    JSON.stringify({
      model: 'm',
      messages: Array.from({ length: 1 + (k % 4) }, () => ({ role: 'user', content: randomText(rng, 400) })),
      user: `u${k}`,
      ...(k % 3 === 0 ? { hash_ids: [k, k + 1] } : {}),
      stream: k % 2 === 0,
    }),
  );
  const summary = (p: ParsedRequest) => ({
    model: p.model,
    stream: p.stream,
    session: p.route.session,
    ids: Array.from(p.route.hashIds ?? [], String),
    inputTokens: p.route.inputTokens,
    body: p.body.toString('latin1'),
  });

  it('scans in several workers at once as the main thread does, and survives their termination', async () => {
    const expected = bodies.map((body) => {
      const s = summary(scanRequest('chat', Buffer.from(body), '', true));
      return { sync: s, threaded: s };
    });
    const pool = new Piscina({
      filename: new URL('./fixtures/scan-worker.mjs', import.meta.url).href,
      minThreads: 2,
      maxThreads: 2,
    });
    try {
      const results = await Promise.all([pool.run({ bodies }), pool.run({ bodies })]);
      for (const r of results) expect(r).toEqual(expected);
      // Terminated mid-task, with threadpool scans in flight: each worker counts its first round
      // in `started`, so both are looping when the pool is destroyed.
      const started = new Int32Array(new SharedArrayBuffer(4));
      const running = [0, 1].map(() => pool.run({ bodies, loopMs: 60_000, started }));
      const settled = Promise.allSettled(running);
      for (let seen = 0; seen < 2; seen = Atomics.load(started, 0)) await waitAsync(started, 0, seen).value;
      await pool.destroy();
      expect((await settled).every((s) => s.status === 'rejected')).toBe(true);
    } finally {
      await pool.destroy().catch(() => undefined);
    }
    // The main thread's scanner still works.
    expect(summary(scanRequest('chat', Buffer.from(bodies[1]!), '', true))).toEqual(expected[1]!.sync);
  });
});
