/**
 * Generated completion request bodies for the scanner's differential test: chat and completions
 * bodies written as JSON text by hand (random whitespace, random escape choices, number spellings
 * JSON.stringify would never write), with the values that stress JavaScript fidelity (astral and
 * control characters, duplicate keys, array-index keys, numbers at the edges of double
 * formatting; flow control's integer fields `priority`, `max_tokens` and `max_completion_tokens`
 * spelled every way JSON allows, and as floats, strings, bools and null), and mutations that make
 * them malformed.
 */
import type { Rng } from './random.js';

/** A JSON value to write, with the liberties JSON text allows kept explicit. */
export type Json =
  | null
  | boolean
  | { num: string } // the number's text, as written
  | { str: string } // a JavaScript string (may hold lone surrogates)
  | Json[]
  | { obj: [string, Json][] }; // members in order, duplicates allowed

const ASCII = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.,:;!?()[]{}<>/\\"\'`~@#$%^&*+=|';
const WIDE = ['é', 'ß', 'Ж', '中', '文', '日本', '\u2028', '\u2029', '\u00a0', '\ufeff', '\u007f', '€', '\uffff'];
const ASTRAL = ['😀', '𝄞', '🚀', '\u{10ffff}', '\u{1f600}\u{1f3fd}', '𠀀'];
const KEYS = [
  'a',
  'b',
  'id',
  'type',
  'text',
  'url',
  '0',
  '1',
  '2',
  '10',
  '01',
  '-1',
  '1.5',
  '4294967294',
  '4294967295',
];
const ODD_KEYS = ['__proto__', 'toString', 'valueOf', 'constructor', '', 'ключ', '😀', 'a\u0000b', 'hash_ids'];

export function randomText(rng: Rng, maxLength = 24): string {
  const n = rng.int(0, maxLength);
  let s = '';
  for (let i = 0; i < n; i++) {
    const r = rng.next();
    if (r < 0.6) s += ASCII[rng.int(0, ASCII.length - 1)];
    else if (r < 0.72) s += String.fromCharCode(rng.int(0, 0x1f));
    else if (r < 0.86) s += rng.pick(WIDE);
    else if (r < 0.97) s += rng.pick(ASTRAL);
    else s += '\n\t\r"\\'[rng.int(0, 4)];
  }
  return s;
}

/** A double from random bits (finite), or a value at the edges of JavaScript's formatting. */
function randomDouble(rng: Rng): number {
  const r = rng.next();
  if (r < 0.3) {
    const bits = new BigUint64Array([rng.u64()]);
    const x = new Float64Array(bits.buffer)[0]!;
    return Number.isFinite(x) ? x : 1.5;
  }
  if (r < 0.5)
    return rng.pick([
      0,
      -0,
      1,
      -1,
      0.1,
      0.5,
      1e21,
      1e-7,
      1e-6,
      123e-20,
      1e20,
      Number('999999999999999999999'),
      5e-324,
      2 ** 53,
      2 ** 53 + 2,
      -(2 ** 31),
      1.7976931348623157e308,
      2.2250738585072014e-308,
      4.35,
      0.000001234,
      100,
      1.5e300,
      Number('9.007199254740993e15'),
    ]);
  if (r < 0.75) return rng.int(-1000, 1000) * 10 ** rng.int(-25, 25);
  return (rng.next() - 0.5) * 10 ** rng.int(-12, 24);
}

/** The number's text in one of the spellings JSON allows. */
export function numberText(rng: Rng, x: number): string {
  const r = rng.next();
  const neg = Object.is(x, -0) || x < 0;
  if (r < 0.45) {
    const text = Object.is(x, -0) ? '-0' : String(x);
    // An integer of 20+ digits is beyond 64 bits, which the scanner hands to JavaScript: keep
    // those rare so the scanner itself answers most bodies.
    return /^-?\d{20,}$/.test(text) && rng.chance(0.9) ? x.toExponential() : text;
  }
  if (r < 0.6) return x.toExponential().replace('e+', rng.chance(0.5) ? 'e' : 'E+');
  if (r < 0.75) return x.toPrecision(rng.int(17, 21)).replace('e+', 'e');
  if (r < 0.85 && Number.isInteger(x) && Math.abs(x) < 1e21) return `${BigInt(x)}.${'0'.repeat(rng.int(1, 3))}`;
  if (r < 0.95) {
    // Many digits: the slow path of correct rounding.
    const digits = Array.from({ length: rng.int(18, 40) }, () => rng.int(0, 9)).join('');
    return `${neg ? '-' : ''}${rng.int(1, 9)}.${digits}e${rng.int(-320, 300)}`;
  }
  return Object.is(x, -0) ? '-0.0e5' : String(x);
}

export function num(rng: Rng, x?: number): Json {
  return { num: numberText(rng, x ?? randomDouble(rng)) };
}

export function str(s: string): Json {
  return { str: s };
}

export function obj(...members: [string, Json][]): Json {
  return { obj: members };
}

export function randomValue(rng: Rng, depth = 0): Json {
  const r = rng.next();
  if (depth > 4 || r < 0.25) return rng.chance(0.5) ? str(randomText(rng)) : num(rng);
  if (r < 0.35) return rng.pick([null, true, false]);
  if (r < 0.6) return Array.from({ length: rng.int(0, 4) }, () => randomValue(rng, depth + 1));
  const n = rng.int(0, 5);
  const members: [string, Json][] = [];
  for (let i = 0; i < n; i++) {
    const key = rng.chance(0.8) ? rng.pick(KEYS) : rng.chance(0.7) ? rng.pick(ODD_KEYS) : randomText(rng, 6);
    members.push([key, randomValue(rng, depth + 1)]);
  }
  return { obj: members };
}

// ---- writing JSON text ---------------------------------------------------------------------

function ws(rng: Rng): string {
  if (!rng.chance(0.15)) return '';
  return Array.from({ length: rng.int(1, 3) }, () => rng.pick([' ', '\n', '\t', '\r', '  '])).join('');
}

const SHORT: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
};

function hex4(code: number, upper: boolean): string {
  const h = code.toString(16).padStart(4, '0');
  return `\\u${upper ? h.toUpperCase() : h}`;
}

/** A string's JSON text, each character raw or escaped at random. */
export function quote(rng: Rng, s: string): string {
  let out = '"';
  for (const ch of s) {
    const code = ch.codePointAt(0)!;
    const escape = rng.chance(0.12);
    if (code < 0x20 || ch === '"' || ch === '\\') {
      out += SHORT[ch] !== undefined && !escape ? SHORT[ch] : hex4(code, rng.chance(0.5));
    } else if (code >= 0xd800 && code <= 0xdfff) {
      out += hex4(code, rng.chance(0.5)); // a lone surrogate: only escaped
    } else if (escape) {
      if (ch === '/') out += '\\/';
      else if (code > 0xffff) out += hex4(ch.charCodeAt(0), false) + hex4(ch.charCodeAt(1), rng.chance(0.5));
      else out += hex4(code, rng.chance(0.5));
    } else out += ch;
  }
  return out + '"';
}

export function write(rng: Rng, v: Json): string {
  if (v === null) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (Array.isArray(v)) return `[${ws(rng)}${v.map((x) => write(rng, x) + ws(rng)).join(`,${ws(rng)}`)}]`;
  if ('num' in v) return v.num;
  if ('str' in v) return quote(rng, v.str);
  return `{${ws(rng)}${v.obj.map(([k, x]) => `${quote(rng, k)}${ws(rng)}:${ws(rng)}${write(rng, x)}${ws(rng)}`).join(`,${ws(rng)}`)}}`;
}

// ---- request bodies ------------------------------------------------------------------------

function part(rng: Rng): Json {
  const r = rng.next();
  if (r < 0.4) return obj(['type', str('text')], ['text', str(randomText(rng, 60))]);
  if (r < 0.55)
    return obj(['type', str('image_url')], ['image_url', obj(['url', str(`https://x/${randomText(rng, 8)}`)])]);
  if (r < 0.65)
    return obj(['text', str(randomText(rng))], ['type', str('text')], ['type', rng.pick([str('image'), str('text')])]);
  if (r < 0.72) return obj(['type', str('text')], ['text', rng.chance(0.5) ? num(rng) : null]);
  return randomValue(rng, 1);
}

function badValue(rng: Rng): Json {
  return rng.pick<Json>([null, true, false, num(rng), num(rng, 1e21), str(randomText(rng, 60)), [], obj(), [str('x')]]);
}

function message(rng: Rng): Json {
  const members: [string, Json][] = [];
  const r = rng.next();
  if (r < 0.96) members.push(['role', str(rng.pick(['user', 'assistant', 'system', 'tool', randomText(rng, 8)]))]);
  else if (r < 0.99) members.push(['role', badValue(rng)]);
  const c = rng.next();
  if (c < 0.45) members.push(['content', str(randomText(rng, 200))]);
  else if (c < 0.8) members.push(['content', Array.from({ length: rng.int(0, 4) }, () => part(rng))]);
  else if (c < 0.9) members.push(['content', null]);
  else if (c < 0.93) members.push(['content', rng.pick<Json>([num(rng), true, obj(['text', str('x')])])]);
  if (rng.chance(0.15)) members.push(['name', rng.chance(0.93) ? str(randomText(rng, 10)) : badValue(rng)]);
  if (rng.chance(0.15)) members.push(['tool_call_id', rng.chance(0.93) ? str(randomText(rng, 10)) : badValue(rng)]);
  if (rng.chance(0.2)) {
    const call = obj(
      ['id', str(`call_${randomText(rng, 5)}`)],
      ['type', str('function')],
      ['function', obj(['name', str('f')], ['arguments', str(randomText(rng, 30))])],
      ['extra', randomValue(rng, 2)],
    );
    members.push([
      'tool_calls',
      rng.chance(0.8) ? [call, randomValue(rng, 1)] : rng.chance(0.5) ? null : randomValue(rng, 1),
    ]);
  }
  if (rng.chance(0.1)) members.push(['role', str('user')]); // a duplicate: the last wins
  if (rng.chance(0.05)) members.push(['content', str(randomText(rng))]);
  return rng.chance(0.99) ? { obj: shuffle(rng, members) } : badValue(rng);
}

function shuffle<T>(rng: Rng, items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = rng.int(0, i);
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

function promptArray(rng: Rng, depth = 0): Json {
  return Array.from({ length: rng.int(0, 5) }, () => {
    const r = rng.next();
    if (r < 0.35) return str(randomText(rng, 30));
    if (r < 0.6) return num(rng, rng.chance(0.5) ? rng.int(0, 50000) : undefined);
    if (r < 0.7) return rng.pick<Json>([null, true, false]);
    if (r < 0.85 && depth < 3) return promptArray(rng, depth + 1);
    if (r < 0.95) return obj(['a', num(rng)]);
    return obj([rng.pick(['toString', 'valueOf']), num(rng)]);
  });
}

function hashIds(rng: Rng): Json {
  if (rng.chance(0.85)) {
    return Array.from({ length: rng.int(0, 12) }, () => {
      const x = rng.pick([0, 1, rng.int(0, 2 ** 31), rng.int(0, 2 ** 52) * 2 + 1, 2 ** 53 - 1, 1000]);
      return { num: rng.chance(0.1) ? (x === 0 ? '-0' : `${x}.0`) : rng.chance(0.05) ? x.toExponential() : String(x) };
    });
  }
  return rng.pick<Json>([
    null,
    str('1,2'),
    obj(),
    [{ num: '-1' }],
    [{ num: '1.5' }],
    [{ num: '9007199254740992' }],
    [{ num: '9007199254740993' }],
    [str('1')],
    [null],
    [{ num: '1e300' }],
  ]);
}

/** An integer in one of JSON's spellings, or not an integer at all (a float, string, bool, null, …). */
function integerField(rng: Rng): Json {
  if (rng.chance(0.75)) {
    const x =
      rng.pick([0, 1, 2, 16, 256, 1000, 2 ** 31, 2 ** 53 - 1, rng.int(0, 100_000)]) * (rng.chance(0.4) ? -1 : 1);
    const r = rng.next();
    if (r < 0.6) return { num: String(x) };
    if (r < 0.7) return { num: x === 0 ? rng.pick(['-0', '0.0', '-0.0e3']) : `${x}.0` };
    if (r < 0.8) return { num: x.toExponential() };
    return num(rng, x);
  }
  return rng.pick<Json>([
    null,
    true,
    false,
    str('1'),
    str('high'),
    { num: '1.5' },
    { num: '-0.5' },
    { num: '1e300' },
    { num: '-1e21' },
    { num: '9007199254740993' },
    { num: '18446744073709551615' },
    { num: '-9223372036854775809' },
    num(rng),
    [],
    obj(['priority', { num: '1' }]),
  ]);
}

export interface GeneratedBody {
  endpoint: 'chat' | 'completions';
  value: Json;
}

/** A request body: mostly valid, with every field sometimes missing, mistyped or duplicated. */
export function requestBody(rng: Rng): GeneratedBody {
  const endpoint = rng.chance(0.65) ? 'chat' : 'completions';
  const members: [string, Json][] = [];
  const m = rng.next();
  if (m < 0.95) members.push(['model', str(rng.chance(0.9) ? 'qwen3-coder' : randomText(rng, 12) || 'm')]);
  else if (m < 0.98) members.push(['model', badValue(rng)]);
  if (endpoint === 'chat') {
    if (rng.chance(0.98))
      members.push([
        'messages',
        rng.chance(0.98) ? Array.from({ length: rng.int(0, 6) }, () => message(rng)) : badValue(rng),
      ]);
  } else if (rng.chance(0.98)) {
    const p = rng.next();
    members.push(['prompt', p < 0.5 ? str(randomText(rng, 300)) : p < 0.95 ? promptArray(rng) : badValue(rng)]);
  }
  if (rng.chance(0.3)) members.push(['hash_ids', hashIds(rng)]);
  if (rng.chance(0.5)) members.push(['stream', rng.chance(0.8) ? rng.pick([true, false]) : badValue(rng)]);
  if (rng.chance(0.4)) members.push(['user', rng.chance(0.85) ? str(randomText(rng, 12)) : badValue(rng)]);
  if (rng.chance(0.4)) members.push(['temperature', num(rng)]);
  if (rng.chance(0.3)) members.push(['metadata', randomValue(rng)]);
  if (rng.chance(0.25)) members.push(['priority', integerField(rng)]);
  if (rng.chance(0.25)) members.push(['max_tokens', integerField(rng)]);
  if (rng.chance(0.15)) members.push(['max_completion_tokens', integerField(rng)]);
  if (rng.chance(0.03)) members.push(['priority', integerField(rng)]); // a duplicate: the last wins
  if (rng.chance(0.1)) members.push(['hash_ids', hashIds(rng)]); // a duplicate
  if (rng.chance(0.05)) members.push(['model', str('other')]);
  return { endpoint, value: { obj: shuffle(rng, members) } };
}

/** `depth` arrays around a value (for the nesting limit). */
export function nested(depth: number): Json {
  let v: Json = { num: '1' };
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

const INVALID_UTF8 = [
  [0xff],
  [0xc0, 0x80],
  [0xe2, 0x82],
  [0xed, 0xa0, 0x80],
  [0xf4, 0x90, 0x80, 0x80],
  [0x80],
  [0xf0, 0x9f],
];

/** A malformed variant of `bytes`. */
export function mutate(rng: Rng, bytes: Buffer): { kind: string; bytes: Buffer } {
  const at = rng.int(0, bytes.length);
  const r = rng.next();
  if (r < 0.25) return { kind: 'truncate', bytes: bytes.subarray(0, at) };
  if (r < 0.45) {
    const copy = Buffer.from(bytes);
    if (copy.length > 0)
      copy[Math.min(at, copy.length - 1)] = rng.pick([
        0x22,
        0x2c,
        0x5b,
        0x7d,
        0x3a,
        0x5c,
        0x20,
        0x00,
        0x31,
        0x2d,
        rng.int(0, 255),
      ]);
    return { kind: 'flip', bytes: copy };
  }
  if (r < 0.6) {
    const bad = Buffer.from(rng.pick(INVALID_UTF8));
    return { kind: 'utf8', bytes: Buffer.concat([bytes.subarray(0, at), bad, bytes.subarray(at)]) };
  }
  if (r < 0.7) {
    const junk = rng.pick([
      'x',
      ',',
      ']',
      '}',
      '{}',
      '"',
      'nul',
      '1e',
      '01',
      '\\',
      '\ufeff',
      '1e400',
      '"\\ud800"',
      '"\\x"',
    ]);
    return { kind: 'insert', bytes: Buffer.concat([bytes.subarray(0, at), Buffer.from(junk), bytes.subarray(at)]) };
  }
  if (r < 0.8) return { kind: 'bom', bytes: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]) };
  if (r < 0.9) {
    const copy = Buffer.from(bytes);
    const from = Math.min(at, copy.length);
    const end = Math.min(copy.length, from + rng.int(1, 8));
    return { kind: 'delete', bytes: Buffer.concat([copy.subarray(0, from), copy.subarray(end)]) };
  }
  return {
    kind: 'trailing',
    bytes: Buffer.concat([bytes, Buffer.from(rng.pick([' x', ' {}', '\u0000', ' ,', '\n\n']))]),
  };
}
