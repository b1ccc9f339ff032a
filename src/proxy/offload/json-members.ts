/**
 * Edits of a JSON object's top-level members on its bytes, without parsing the object or
 * serialising it again: the offload exchange (offload-bodies.ts) rewrites a few small members of
 * request bodies that can be megabytes of prompt, and strips one member from engine responses.
 *
 * Algorithm: topLevelMembers() walks the object once and returns, per top-level member, its key
 * and the byte range `"key": value`. Strings are skipped with a native search for the next quote
 * (Buffer.indexOf) and an escape check (an even run of backslashes before it ends the string), so
 * prompt text, the bulk of a body, is not visited byte by byte; nested arrays and objects are
 * skipped by counting brackets outside strings, each structural byte found by a native search
 * too (containerEnd), so a long `hash_ids` array costs a few memchr passes. rebuildObject() then concatenates the kept
 * members' slices (adjacent kept members as one slice, their separators included) and appended
 * members: one copy of the body, no parse, no serialisation.
 *
 * Input: bytes that already passed the request scanner (valid JSON; an object for requests). The
 * walk checks only the structure it needs and answers undefined for anything else (not an
 * object, cut short), so an engine's malformed response is left alone rather than mangled. Keys
 * with escapes (`"max\u005ftokens"`) are unescaped, so they match as JSON.parse would.
 *
 * Duplicate keys: every member is listed; a rebuild that drops a key drops each occurrence.
 *
 * Complexity: O(n) in the body's bytes, with the string runs at memchr speed; one allocation per
 * member (its key) plus the output. bench/offload-bodies.ts compares it with JSON.parse +
 * JSON.stringify.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const COLON = 0x3a;
const COMMA = 0x2c;

const OPEN = Buffer.from('{');
const CLOSE = Buffer.from('}');
const SEPARATOR = Buffer.from(',');

/** One top-level member: bytes [start, end) are `"key": value`; the value starts at valueStart. */
export interface JsonMember {
  key: string;
  start: number;
  valueStart: number;
  end: number;
}

const isSpace = (c: number | undefined): boolean => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

function skipSpace(b: Buffer, i: number): number {
  while (i < b.length && isSpace(b[i])) i++;
  return i;
}

/** The index just past the string whose opening quote is at b[i], or -1 if it never closes. */
function stringEnd(b: Buffer, i: number): number {
  let from = i + 1;
  for (;;) {
    const quote = b.indexOf(QUOTE, from);
    if (quote < 0) return -1;
    let slashes = 0;
    for (let k = quote - 1; k > i && b[k] === BACKSLASH; k--) slashes++;
    if ((slashes & 1) === 0) return quote + 1;
    from = quote + 1;
  }
}

/** The index just past the value that starts at b[i], or -1. */
function valueEnd(b: Buffer, i: number): number {
  const c = b[i];
  if (c === QUOTE) return stringEnd(b, i);
  if (c === OPEN_BRACE || c === OPEN_BRACKET) return containerEnd(b, i);
  // A number, true, false or null: up to the next delimiter.
  let j = i;
  while (j < b.length) {
    const d = b[j];
    if (d === COMMA || d === CLOSE_BRACE || d === CLOSE_BRACKET || isSpace(d)) break;
    j++;
  }
  return j > i ? j : -1;
}

/** Where `byte` next occurs at or after `from` (Infinity: nowhere). */
const nextAt = (b: Buffer, byte: number, from: number): number => {
  const at = b.indexOf(byte, from);
  return at < 0 ? Infinity : at;
};

/**
 * The index just past the array or object that opens at b[i], or -1. The next position of each
 * structural byte (quote, the four brackets) is found by a native search and kept until the walk
 * passes it, so each byte class is searched through once: digits, commas and string contents are
 * never visited one by one.
 */
function containerEnd(b: Buffer, i: number): number {
  let depth = 0;
  let j = i;
  let quote = -1;
  let openBrace = -1;
  let closeBrace = -1;
  let openBracket = -1;
  let closeBracket = -1;
  for (;;) {
    if (quote < j) quote = nextAt(b, QUOTE, j);
    if (openBrace < j) openBrace = nextAt(b, OPEN_BRACE, j);
    if (closeBrace < j) closeBrace = nextAt(b, CLOSE_BRACE, j);
    if (openBracket < j) openBracket = nextAt(b, OPEN_BRACKET, j);
    if (closeBracket < j) closeBracket = nextAt(b, CLOSE_BRACKET, j);
    const k = Math.min(quote, openBrace, closeBrace, openBracket, closeBracket);
    if (k === Infinity) return -1;
    if (k === quote) {
      j = stringEnd(b, k);
      if (j < 0) return -1;
    } else if (k === openBrace || k === openBracket) {
      depth++;
      j = k + 1;
    } else {
      if (--depth === 0) return k + 1;
      j = k + 1;
    }
  }
}

/** The key of the string at [start, end) (quotes included), unescaped when it has escapes. */
function keyOf(b: Buffer, start: number, end: number): string {
  const raw = b.toString('utf8', start + 1, end - 1);
  if (!raw.includes('\\')) return raw;
  try {
    return JSON.parse(b.toString('utf8', start, end)) as string;
  } catch {
    return raw;
  }
}

/** The top-level members of the JSON object in `b`, in order; undefined if `b` is not one. */
export function topLevelMembers(b: Buffer): JsonMember[] | undefined {
  let i = skipSpace(b, 0);
  if (b[i] !== OPEN_BRACE) return undefined;
  i = skipSpace(b, i + 1);
  const members: JsonMember[] = [];
  if (b[i] === CLOSE_BRACE) return members;
  for (;;) {
    if (b[i] !== QUOTE) return undefined;
    const keyEnd = stringEnd(b, i);
    if (keyEnd < 0) return undefined;
    let j = skipSpace(b, keyEnd);
    if (b[j] !== COLON) return undefined;
    j = skipSpace(b, j + 1);
    const end = valueEnd(b, j);
    if (end < 0) return undefined;
    members.push({ key: keyOf(b, i, keyEnd), start: i, valueStart: j, end });
    i = skipSpace(b, end);
    if (b[i] === CLOSE_BRACE) return members;
    if (b[i] !== COMMA) return undefined;
    i = skipSpace(b, i + 1);
  }
}

/**
 * The object again, without the members whose key `drop` holds and with `append` (members as
 * JSON text, `"a":1,"b":2`, or '') at its end. Kept members keep their bytes exactly.
 */
export function rebuildObject(
  b: Buffer,
  members: readonly JsonMember[],
  drop: ReadonlySet<string>,
  append: string,
): Buffer {
  const parts: Buffer[] = [OPEN];
  let runStart = -1;
  let runEnd = -1;
  let any = false;
  const flush = (): void => {
    if (runStart < 0) return;
    if (any) parts.push(SEPARATOR);
    parts.push(b.subarray(runStart, runEnd));
    any = true;
    runStart = -1;
  };
  for (const m of members) {
    if (drop.has(m.key)) {
      flush();
      continue;
    }
    if (runStart < 0) runStart = m.start;
    runEnd = m.end;
  }
  flush();
  if (append !== '') {
    if (any) parts.push(SEPARATOR);
    parts.push(Buffer.from(append));
  }
  parts.push(CLOSE);
  return Buffer.concat(parts);
}

/**
 * `b` without its top-level member(s) `key`: `b` itself (no copy) when it has none or is not a
 * JSON object. `needle` is `"key"` as bytes, searched first so that the common case costs one
 * native substring search.
 */
export function withoutMember(b: Buffer, key: string, needle: Buffer): Buffer {
  if (b.indexOf(needle) < 0) return b;
  const members = topLevelMembers(b);
  if (members === undefined || !members.some((m) => m.key === key)) return b;
  return rebuildObject(b, members, new Set([key]), '');
}
